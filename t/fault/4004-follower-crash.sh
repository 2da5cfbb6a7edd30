#!/bin/bash
# kill -9 of a follower broker while a job runs on it (doc/spec/shell.md
# §8). Its shells outlive it and wait to be re-attached, and rank 0 waits
# for the rank up to exec.reattach-timeout (6 s here) instead of failing
# the job. Started again within it, the broker adopts its shells, with
# their cgroups and memory limit, and the job runs on to its own end:
# started again at once, and after rank 0 has logged the wait. Not back
# in time, the job ends with node-failure, and the rank's shells, which
# waited as long, end their tasks; a job's own --reattach-timeout
# shortens the wait, never lengthens it. Canceled while rank 0 waits, the
# job ends at once; the broker that comes back later is told so
# (exec.reconcile) and kills its tasks.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 2 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1s"\nlost_timeout = "2s"\n[exec]\nreattach-timeout = "6s"'
marker=$((RANDOM + 1000))
write_waiting_task
tasks_are() { waiting_tasks_are "$T_DIR/go-$marker" "$1"; }
kill_rank1() { kill -9 "$(broker_pid "$T_DIR" 1)"; }

# The cgroups rank 1 made for job ID (shell.md §1), under the brokers'
# own in the unified hierarchy (the brokers are started from here).
unified=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
own=$(sed -n 's/^0:://p' /proc/self/cgroup)
contained=false
[ -n "$unified" ] && [ -w "$unified${own%/}" ] && contained=true
rank1_cgroups() { ls -d "$unified${own%/}"/banyan-1-*-"$1".* 2>/dev/null; }
no_rank1_cgroup() { [ -z "$(rank1_cgroups "$1")" ]; }

# 1. Started again at once.
job_on_both
$contained && check "rank 1 runs the job in a cgroup of its own" rank1_cgroups "$id"
kill_rank1
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 re-attached its shell" 20 grep -q "$id: re-attached its shell" "$T_DIR/rank-1.log"
wait_for "rank 0 asked it for the job's share again" 20 grep -q "$id: rank 1 is back: asking it" "$T_DIR/rank-0.log"
check "both tasks still run" tasks_are 2
runs_on_to_its_end
if $contained; then
    wait_for "the job's cgroup, adopted with its shell, is removed at its end" 15 no_rank1_cgroup "$id"
else
    echo "# no writable cgroup v2 hierarchy here: the adopted cgroup is not checked"
fi

# 1b. A job's memory limit holds across the restart, and an OOM kill after
# it is reported as one before it would be (1007).
if grep -q "jobs' memory (--mem) is limited in" "$T_DIR/rank-1.log"; then
    marker=$((marker + 1))
    id=$(banyan submit --requires rank:1 --mem=64M sh -c \
        "while [ ! -e $T_DIR/go-$marker ]; do sleep 0.1; done; python3 -c 'b = bytearray(400 << 20)'")
    check "a job with --mem=64M starts on rank 1" timeout 20 banyan job wait-event "$id" start
    kill_rank1
    start_broker "$T_DIR/c.toml" 1
    wait_for "rank 1 re-attached its shell" 20 grep -q "$id: re-attached its shell" "$T_DIR/rank-1.log"
    touch "$T_DIR/go-$marker"
    check_fails "over its --mem after the restart, it fails with the oom exception that says so" \
        "oom: out of memory on rank 1: the kernel killed 1 process of the job for using more than its 64 MiB here" \
        timeout 30 banyan job wait "$id"
else
    echo "# no memory controller for the brokers here: the limit across a restart is not checked"
fi

# 2. Back after rank 0 had it lost.
job_on_both
kill_rank1
killed=$SECONDS
wait_for "rank 0 has rank 1 lost, and waits for it" 15 \
    grep -q "$id: rank 1 lost (.*): waiting up to 6s for it to come back" "$T_DIR/rank-0.log"
check_output "the job still runs" "^$id R$" sh -c "banyan jobs --no-header -o '{id} {st}' | grep '^$id '"
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 is back" 30 all_up 2
check "within exec.reattach-timeout" test $((SECONDS - killed)) -lt 6
check "both tasks still run" tasks_are 2
runs_on_to_its_end

# 3. Not back in time: the job ends with node-failure, not before the
# timeout (a job's own longer --reattach-timeout does not lengthen it).
job_on_both --reattach-timeout=1h
kill_rank1
killed=$SECONDS
wait_for "the job ends with node-failure" 20 \
    sh -c "banyan job eventlog $id | grep -q 'exception.*type=node-failure'"
check "not before exec.reattach-timeout (6 s)" test $((SECONDS - killed)) -ge 6
check_output "the eventlog says why" "rank 1 was lost and not back within 6s \(exec.reattach-timeout\)" \
    banyan job eventlog "$id"
# Its shell waited as long for a broker, and ended its task itself.
wait_for "rank 1's task is ended by its own shell: none left" 15 tasks_are 0
check_output "the shell said why" "$id: no broker came back within 6s \(exec.reattach-timeout\): ending the tasks" \
    cat "$T_DIR/rank-1.log"
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 is back" 30 all_up 2

# 3b. A job with a shorter tolerance of its own (--reattach-timeout=1s)
# ends with node-failure after it, not after the instance's 6 s; its task
# on rank 1 is killed when the broker comes back (exec.reconcile).
marker=$((marker + 1))
id=$(banyan submit -N2 -n2 --reattach-timeout=1s bash "$T_DIR/task.sh" "$T_DIR/go-$marker")
wait_for "a job with --reattach-timeout=1s runs on both ranks" 20 tasks_are 2
kill_rank1
killed=$SECONDS
wait_for "it ends with node-failure" 20 sh -c "banyan job eventlog $id | grep -q 'exception.*type=node-failure'"
check "before the instance's exec.reattach-timeout (6 s)" test $((SECONDS - killed)) -lt 6
check_output "the eventlog says its own tolerance ran out" \
    "rank 1 was lost and not back within 1s \(--reattach-timeout\)" banyan job eventlog "$id"
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 is back" 30 all_up 2
wait_for "its task on rank 1 is killed: none left" 15 tasks_are 0
check_output "by the rank, told by rank 0 (its shell still waited)" \
    "$id: rank 0 has no such job running on rank 1" cat "$T_DIR/rank-1.log"
check_output "a tolerance that is no duration is refused in one line" "^1$" \
    sh -c "banyan submit --reattach-timeout=soon true 2>&1 | wc -l"
check_fails "... saying why" \
    "^banyan submit: --reattach-timeout soon: not a duration" banyan submit --reattach-timeout=soon true
check_fails "so is a negative one in the jobspec, at submit" \
    "^banyan submit: jobspec: attributes.system.reattach-timeout: expected seconds, 0 or more$" \
    banyan submit -S reattach-timeout=-1 true

# 4. A job canceled while rank 0 waits for a rank ends at once.
job_on_both
kill_rank1
wait_for "rank 0 waits for rank 1" 15 grep -q "$id: rank 1 lost (.*): waiting up to 6s" "$T_DIR/rank-0.log"
canceled=$SECONDS
check "cancel" banyan cancel "$id"
check_fails "it ends, canceled" "canceled" timeout 10 banyan job wait "$id"
check "at once, not after the timeout" test $((SECONDS - canceled)) -lt 4
check_output "... and is cleaned up once" "^1$" sh -c "banyan job eventlog $id | grep -c ' clean'"
wait_for "... and has one usage record" 10 sh -c "[ \$(banyan history --no-header -o '{id}' | grep -c '^$id\$') -eq 1 ]"
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 is back" 30 all_up 2
wait_for "its adopted task is killed: none left" 15 tasks_are 0

new=$(banyan submit -N2 -n2 true)
check "a new job runs on both ranks" banyan job wait "$new"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
