#!/bin/bash
# Preemption by queue tier (sched.md §9): a job of a higher-tier queue that
# cannot start takes the resources of running jobs of lower tiers, the
# fewest it needs (the latest started first); a `requeue` queue's victim
# gets its queue's signal, is requeued with its id and runs again after,
# its output continued; a `cancel` queue's victim ends with a `preempt`
# exception; a queue with preempt-mode off is never touched. Each victim's
# eventlog names the job that preempted it.
. "$(dirname "$0")/lib.sh"

start_cluster 2 $'[resource]\nsynthetic = "node[0-1]: core:2"
[queues.low]
default = true
preempt-mode = "requeue"
preempt-signal = "USR1"
preempt-grace = "10s"
[queues.scavenger]
preempt-mode = "cancel"
preempt-grace = "0s"
[queues.protected]
preempt-mode = "off"
[queues.high]
priority-tier = 10'
CLEANUP+=("banyan shutdown")
wait_for "the instance runs" 20 banyan ready
cd "$T_DIR"
sim() { echo "-S exec.test.run_duration=$1"; }
events() { banyan job eventlog "$1" | awk '{print $2}' | tr '\n' ' '; }

# A real job in `low` that says how it ends, run by run.
cat >victim.sh <<'SH'
n=$(( $(cat runs 2>/dev/null || echo 0) + 1 )); echo $n >runs
echo "run $n"
trap 'echo "run $n: got USR1"; exit 3' USR1
touch "started.$n"
while [ ! -e "done.$n" ]; do sleep 0.05; done
echo "run $n: done"
SH
low=$(banyan submit -q low -x -N1 sh victim.sh)
wait_for "the low job runs" 20 test -e started.1
scav=$(banyan submit -q scavenger -x -N1 $(sim 3600) true)
banyan job wait-event "$scav" start >/dev/null
high=$(banyan submit -q high -x -N2 sh -c 'touch high.ran')
check "the high-tier job starts, on both nodes" banyan job wait-event -t 30s "$high" start
check "... and completes" banyan job wait "$high"
check_output "the low job was requeued, naming the preemptor" \
    "requeue note=preempted by $high \(queue high\)" banyan job eventlog "$low"
check_output "the scavenger job ended with a preempt exception naming it" \
    "exception note=preempted by $high \(queue high\) severity=0 type=preempt" banyan job eventlog "$scav"
check_output "... its result: failed, by preempt" "^$scav failed preempt: preempted by $high" \
    sh -c "banyan jobs -a --no-header -o '{id} {result} {info}' | grep '^$scav '"
wait_for "the requeued job runs again, with its id" 20 test -e started.2
touch done.2
check "... and ends well" banyan job wait "$low"
check_output "its first run got its queue's signal (USR1)" "^run 1: got USR1$" banyan job attach "$low"
check_output "its output goes on across the requeue" $'^run 1\nrun 1: got USR1\nrun 2\nrun 2: done$' \
    sh -c "banyan job attach $low | tr '\n' '|' | sed 's/|$//' | tr '|' '\n'"
check_output "its eventlog: a first run, the requeue, a second run" \
    '^submit depend priority alloc start requeue finish free clean priority alloc start finish free clean $' \
    events "$low"

# The fewest victims: of two scavenger jobs, the later one; never a
# protected one.
early=$(banyan submit -q scavenger -x -N1 $(sim 3600) true)
banyan job wait-event "$early" start >/dev/null
late=$(banyan submit -q scavenger -x -N1 $(sim 3600) true)
banyan job wait-event "$late" start >/dev/null
one=$(banyan submit -q high -x -N1 $(sim 3600) true)
check "a one-node high job starts" banyan job wait-event -t 30s "$one" start
check_output "it preempted the later scavenger job" "type=preempt" banyan job eventlog "$late"
check "... and not the earlier one, which still runs" lacks "preempt" banyan job eventlog "$early"
banyan cancel "$early" "$one"
banyan job wait "$early" >/dev/null 2>&1
guarded=$(banyan submit -q protected -x -N2 $(sim 3600) true)
banyan job wait-event "$guarded" start >/dev/null
blocked=$(banyan submit -q high -x -N1 $(sim 1) true)
# A pass that looked at it and preempted nothing leaves this reason.
wait_for "a protected job is never preempted: the high job waits" 20 \
    sh -c "banyan jobs --no-header -o '{id} {st} {info}' | grep -q '^$blocked S insufficient resources\$'"
check "... and the protected job runs on" lacks "preempt" banyan job eventlog "$guarded"
banyan cancel "$guarded"
check "once it ends, the high job runs" banyan job wait "$blocked"

# A bad preemption setting stops the broker at start, naming it.
check_fails "an unknown preempt-mode is refused, naming it" \
    "queues.x.preempt-mode: 'sometimes': expected cancel, requeue or off" \
    banyan start --test-size=1 -S 'queues.x.preempt-mode="sometimes"' true
check_fails "an unknown preempt-signal is refused" "queues.x.preempt-signal: HUPP: not a signal" \
    banyan start --test-size=1 -S 'queues.x.preempt-signal="HUPP"' true
check_fails "a tier over 1000 is refused" "queues.x.priority-tier: expected an integer in 0-1000" \
    banyan start --test-size=1 -S 'queues.x.priority-tier=5000' true
