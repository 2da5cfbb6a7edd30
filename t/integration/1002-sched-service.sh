#!/bin/bash
# The scheduler service driven by a stand-in job manager (banyan-test-client
# sends what the job manager will send): alloc answered when the job
# starts, easy backfill's reservation in sched.queue, an impossible job
# refused at once, free, cancel of a pending job, hello after a restart,
# and bad requests answered with one clear line.
. "$(dirname "$0")/lib.sh"

job() {  # job N NODES: N whole nodes for an hour
    printf '{"id":%s,"jobspec":{"version":1,"resources":[{"type":"node","count":%s,"exclusive":true,"with":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":3600}}}}' "$1" "$2"
}
export -f job
cat >"$T_DIR/fake-job-manager.sh" <<'SCRIPT'
set -u
rpc() { banyan-test-client rpc "$@"; }
# queued ID FILE [REASON]: waits (10 s at most) until sched.queue lists job
# ID (with REASON, a regex, once a pass has placed it); FILE gets that
# listing.
queued() {
    for _ in $(seq 200); do
        rpc sched.queue '{}' >"$T_DIR/queue.now"
        grep -qE "\"id\":$1,[^}]*${3:-}" "$T_DIR/queue.now" && break
        sleep 0.05
    done
    cp "$T_DIR/queue.now" "$2"
}
out=$T_DIR/fjm
rpc sched.alloc "$(job 1 1)" >"$out.1"
rpc sched.alloc "$(job 2 2)" >"$out.2" &
alloc2=$!
queued 2 "$out.queue" '"t_estimate"'
rpc sched.alloc "$(job 3 3)" >"$out.3"
rpc sched.free '{"id":1}' >"$out.free1"
wait $alloc2
rpc sched.alloc "$(job 4 1)" >"$out.4" &
alloc4=$!
queued 4 /dev/null
rpc sched.cancel '{"id":4}' >"$out.cancel4"
wait $alloc4
rpc sched.free '{"id":2}' >/dev/null
rpc sched.hello '{"jobs":[{"id":9,"R":{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-3"}}],"starttime":0,"expiration":0}}}]}' >"$out.hello"
rpc sched.alloc "$(job 10 2)" >"$out.10" &
queued 10 "$out.queue2" '"reason":"insufficient resources"'
rpc sched.free '{"id":9}' >/dev/null
wait
rpc sched.alloc '{"id":11}' >"$out.bad1"
rpc sched.alloc '{"id":12,"jobspec":{"version":1}}' >"$out.bad2"
rpc sched.free '{"id":"x"}' >"$out.bad3"
rpc sched.free '{"id":77}' >"$out.bad4"
instance_dir >"$T_DIR/instance"
SCRIPT
check "the stand-in job manager runs its script" \
    banyan start --test-size=1 -S 'resource.synthetic="node[0-1]: socket:1,core:4"' -S 'sched.queue-policy="easy"' \
    bash "$T_DIR/fake-job-manager.sh"
o=$T_DIR/fjm
check_output "job 1 starts on one node" '^\{"R":\{.*"R_lite":\[\{"children":\{"core":"0-3"\},"rank":"0"\}\].*"id":1\}' cat "$o.1"
check_output "job 2 waits for both nodes, reserved an hour on" \
    '"id":2,"priority":16,"reason":"insufficient resources","t_estimate":[0-9]+' cat "$o.queue"
check_output "an impossible job is refused at once" "^error 28: unsatisfiable" cat "$o.3"
check_output "free answers" '^\{\}$' cat "$o.free1"
check_output "job 2 starts on both nodes once job 1 is freed" '"rank":"0-1"' cat "$o.2"
check_output "a pending job that is canceled gets ECANCELED" "^error 125: job 4 was canceled while pending" cat "$o.4"
check_output "cancel answers" '^\{\}$' cat "$o.cancel4"
check_output "hello takes back a running job" '^\{"refused":\[\]\}$' cat "$o.hello"
check_output "the restored job holds its node" '"id":10,.*"reason":"insufficient resources"' cat "$o.queue2"
check_output "job 10 starts once the restored job is freed" '"rank":"0-1"' cat "$o.10"
check_output "alloc without a jobspec" "^error 71: sched.alloc: expected a jobspec" cat "$o.bad1"
check_output "alloc with a bad jobspec names the key" "^error 22: jobspec: resources" cat "$o.bad2"
check_output "free with a bad id names the field" "^error 71: sched.free.id: expected a non-negative integer" \
    cat "$o.bad3"
check_output "free of an unknown job" "^error 2: job 77 holds no resources" cat "$o.bad4"
check_fails "a bad queue policy stops the broker with one line" "sched.queue-policy: unknown queue policy 'lifo'" \
    banyan start --test-size=1 -S 'sched.queue-policy="lifo"' true
no_brokers_left "no broker of the instance is left" "$(cat "$T_DIR/instance")"

# Backfill by default: with one of two cores busy and a 2-core job waiting
# for it, a short 1-core job runs at once on the idle core (under fcfs it
# waited behind the 2-core job).
cat >"$T_DIR/backfill.sh" <<'SCRIPT'
set -eu
long=$(banyan submit -n1 -t 60s sleep 30)
until banyan jobs -o '{id} {st}' | grep -q "^$long R$"; do sleep 0.05; done
wide=$(banyan submit -n1 -c2 -t 60s true)
short=$(banyan submit -n1 -t 5s true)
timeout 10 banyan job wait "$short"
banyan jobs -a -o '{id} {st}' | sed -e "s/^$long /long /" -e "s/^$wide /wide /" -e "s/^$short /short /"
banyan cancel "$long" "$wide"
SCRIPT
banyan start --test-size=1 -S 'resource.synthetic="node[0]: socket:1,core:2"' bash "$T_DIR/backfill.sh" \
    >"$T_DIR/backfill.out" 2>&1
check_output "by default a short job backfills an idle core, ahead of a wide one that cannot start" \
    "^short CD$" cat "$T_DIR/backfill.out"
check_output "... while the wide one waits" "^wide S$" cat "$T_DIR/backfill.out"
check_output "... behind the long one" "^long R$" cat "$T_DIR/backfill.out"
