#!/bin/bash
# The scheduler obeys node state, from the one source of truth (the
# resource service's resource.acquire stream): drained and lost nodes get no
# new jobs, a job that needs them waits with the reason and runs when they
# return, a drain lets running jobs finish, a broker that comes back with
# another core count is scheduled with its new count; resource list and
# status show what the scheduler has allocated.
. "$(dirname "$0")/lib.sh"

for r in 0 1 2 3; do lstopo-no-graphics -i "pack:1 core:2 pu:1" --of xml "$T_DIR/rank$r.xml" 2>/dev/null; done
settings="-S resource.hwloc_xml=$T_DIR/rank%r.xml -S tbon.torpid_timeout=0.5s -S tbon.heartbeat_period=0.1s"
export settings

# The ranks a job's tasks ran on, from the URI each task was given.
ranks_of_run() { "$@" sh -c 'echo "${BANYAN_URI##*/rank-}"' | sed 's,/.*,,' | sort -un | paste -sd, -; }
info_of() { banyan jobs -a -n 100 --no-header -o '{id} {st} {info}' | grep "^ *$1 "; }
export -f ranks_of_run info_of

inside() {
    dir=$(instance_dir)
    echo "$dir" >"$T_DIR/instance"
    check_output "4 nodes of 2 cores are free" "^ +free +4 +8 +0 " banyan resource list

    # Allocated figures come from the scheduler.
    long=$(banyan submit -N1 -n1 sleep 300)
    wait_for "the sleeper runs" 10 sh -c "banyan jobs -o '{id} {st}' | grep -q '$long  *R'"
    check_output "resource list shows the sleeper's core as allocated" "^ +allocated +1 +1 +0 " banyan resource list
    check_output "and its node's other core as free" "^ +free +4 +7 +0 " banyan resource list
    check_output "--json too" '"allocated":\{"ncores":1,"ngpus":0,"nnodes":1' banyan resource list --json
    sleeper_rank=$(banyan resource list --json | grep -o '"allocated":{[^}]*"ranks":"[0-9]*"' | grep -o '[0-9]*"$' | tr -d '"')
    check "the allocated rank is named" test -n "$sleeper_rank"

    # A drained node with a job still running is draining, then drained.
    check "drain the sleeper's node" banyan resource drain "$sleeper_rank" swapping the fan
    check_output "status says draining while the job runs there" \
        "draining +1 +$sleeper_rank .*swapping the fan \(" banyan resource status
    check_output "the job still runs on its drained node" "$long  *R" banyan jobs -o '{id} {st}'
    check_output "list: the sleeper's core stays allocated, its node's other core is down" \
        "^ +down +1 +1 +0 " banyan resource list
    check "cancel the sleeper" banyan cancel "$long"
    wait_for "it ends" 20 sh -c "banyan jobs -a -o '{id} {st}' | grep -q '$long  *CA'"
    wait_for "status says drained once nothing runs there" 5 \
        sh -c "banyan resource status | grep -Eq 'drained +1 +$sleeper_rank '"
    check "undrain it" banyan resource undrain "$sleeper_rank"

    # Two of four nodes drained: -N4 waits, with the reason, and does not
    # block a -N2 job behind it; it runs when they return.
    check "drain ranks 2-3" banyan resource drain 2-3 maintenance
    wide=$(banyan submit -N4 -n4 true)
    check "a -N4 job is accepted, not refused" test -n "$wide"
    wait_for "it waits for the drained nodes, and says so" 10 \
        bash -c "info_of $wide | grep -q ' S waiting for drained, down or unjoined nodes'"
    check_output "a -N2 job behind it runs on the two nodes that are up" "^0,1$" ranks_of_run banyan run -N2 -n2
    for i in 1 2 3 4; do ranks_of_run banyan run -N1 -n2; done >"$T_DIR/single"
    check_output "no job lands on a drained node" "^[01]$" sort -u "$T_DIR/single"
    check "(and none on 2 or 3)" sh -c "! grep -E '^[23]$' $T_DIR/single"
    check_output "the -N4 job is still pending" "$wide  *S" banyan jobs -o '{id} {st}'
    check "undrain 2-3" banyan resource undrain 2-3
    check "the -N4 job runs and completes once they return" timeout 20 banyan job wait "$wide"
    check_output "it ran on all four" "^0,1,2,3$" ranks_of_run banyan run -N4 -n4

    # A lost node gets no job until it is back: four 2-core jobs on four
    # 2-core nodes, one of them lost: three run, none on rank 3, one waits.
    pid3=$(broker_pid "$dir" 3)
    kill -KILL "$pid3"
    wait_for "rank 3 is down in the list" 10 sh -c "banyan resource list | grep -Eq '^ +down +1 +2 +0 '"
    check_output "a -N3 job runs on the three nodes that are up" "^0,1,2$" ranks_of_run banyan run -N3 -n3
    for i in 1 2 3 4; do banyan submit -N1 -n2 sh -c 'echo "${BANYAN_URI##*/rank-}" >'"$T_DIR"'/lost.$BANYAN_JOB_ID; sleep 300'; done >"$T_DIR/four"
    wait_for "three of them run" 10 sh -c "test \$(ls $T_DIR/lost.* 2>/dev/null | wc -l) -eq 3"
    check "none on the lost rank" sh -c "! grep -h '^3/' $T_DIR/lost.*"
    check_output "the fourth waits for resources" "^1$" sh -c "banyan jobs -f sched --no-header -o '{id}' | wc -l"
    # shellcheck disable=SC2046
    banyan cancel $(cat "$T_DIR/four")
    lostjob=$(banyan submit -N4 -n4 true)
    wait_for "a -N4 job waits for the lost node" 10 \
        bash -c "info_of $lostjob | grep -q ' S waiting for drained, down or unjoined nodes'"

    # Rank 3 comes back with four cores instead of two.
    rm -f "$T_DIR/rank3.xml"
    lstopo-no-graphics -i "pack:1 core:4 pu:1" --of xml "$T_DIR/rank3.xml" 2>/dev/null
    # shellcheck disable=SC2086
    banyan-broker --config "$dir/instance.toml" --rank 3 --rundir "$dir/rank-3" --log-level warning $settings &
    check "the -N4 job runs once rank 3 is back" timeout 30 banyan job wait "$lostjob"
    wait_for "resource list counts rank 3's four cores" 10 sh -c "banyan resource list | grep -Eq '^ +free +4 +10 +0 '"
    check_output "the scheduler uses the new count: 4 tasks of 1 core on rank 3" "^3$" \
        ranks_of_run banyan run -N1 -n4 -c1
    check_fails "6 cores on one node never fit: refused at once" "unsatisfiable" timeout 10 banyan run -N1 -n1 -c6 true

    # A torpid node gets no new jobs either: with rank 2 stopped, a -N3 job
    # of the other three runs at once.
    kill -STOP "$(broker_pid "$dir" 2)"
    wait_for "a stopped broker is torpid" 10 sh -c "banyan resource status | grep -Eq 'torpid +1 +2 '"
    check_output "a -N3 job runs on the three others" "^0,1,3$" ranks_of_run timeout 20 banyan run -N3 -n3
    kill -CONT "$(broker_pid "$dir" 2)"
    wait_for "it is avail again" 10 lacks torpid banyan resource status
}
export -f inside

# shellcheck disable=SC2086
if banyan start --test-size=4 $settings bash -c inside; then ok "instance ran"; else not_ok "instance ran"; fi
no_brokers_left "no broker is left, the restarted one included" "$(cat "$T_DIR/instance")"
