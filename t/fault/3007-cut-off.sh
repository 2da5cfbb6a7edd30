#!/bin/bash
# A rank cut off from its parent does not wait to reach rank 0 again, which
# may never come (its node's link is gone): it kills the tasks of its jobs
# and has the ranks below it do so. Under a parent that is not rank 0 it
# waits tbon.lost_timeout (3 s here: by then the parent has it lost, and
# rank 0 its jobs ended); under rank 0, which may be restarting,
# exec.reattach-timeout (4 s here). Back, it has rank 0 end those jobs
# (node-failure) if rank 0 did not see it go. Four brokers, fanout 2:
# rank 3 is under rank 1, ranks 1 and 2 under rank 0.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 4 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1.5s"\nlost_timeout = "3s"\n[exec]\nreattach-timeout = "4s"'
marker=$((RANDOM + 1000))
# tasks_are N: N tasks of the job running now (`sleep $marker`).
tasks_are() { [ "$(pgrep -fc "^sleep $marker\$")" -eq "$1" ]; }
# job_everywhere_then_stop RANK: a job on all four ranks, then RANK
# stopped; sets id and stopped (when).
job_everywhere_then_stop() {
    id=$(banyan submit -N4 -n4 sleep "$marker")
    wait_for "a job runs on all four ranks" 20 tasks_are 4
    kill -STOP "$(broker_pid "$T_DIR" "$1")"
    stopped=$SECONDS
}

# Rank 1 stopped: rank 3, under it, is cut off; rank 0 loses rank 1.
job_everywhere_then_stop 1
wait_for "only stopped rank 1's task is left: rank 3 killed its own" 15 tasks_are 1
check "not before tbon.lost_timeout (3 s)" test $((SECONDS - stopped)) -ge 3
check_output "rank 3 says why" \
    "has not reached its parent \(rank 1\) for 3s \(tbon.lost_timeout\): killing its tasks" cat "$T_DIR/rank-3.log"
kill -CONT "$(broker_pid "$T_DIR" 1)"
wait_for "rank 1 is back" 30 all_up 4
wait_for "no task of the job is left" 15 tasks_are 0
check_output "the job ended with node-failure" "node-failure" banyan job eventlog "$id"

# Rank 0 stopped: ranks 1 and 2 are cut off from it and wait
# exec.reattach-timeout; rank 3 is told by rank 1.
marker=$((marker + 1))
rank0=$(broker_pid "$T_DIR" 0)
job_everywhere_then_stop 0
wait_for "the tasks of ranks 1, 2 and 3 are killed while rank 0 is still away" 15 tasks_are 1
check "not before exec.reattach-timeout (4 s)" test $((SECONDS - stopped)) -ge 4
check_output "rank 1 says why" "has not reached rank 0 for 4s \(exec.reattach-timeout\): killing its tasks" \
    cat "$T_DIR/rank-1.log"
check_output "rank 3, whose parent is there, was told by rank 1" \
    "rank 1 has not reached rank 0 for 4s \(exec.reattach-timeout\): killing its tasks" cat "$T_DIR/rank-3.log"
kill -CONT "$rank0"
wait_for "all ranks are back" 30 all_up 4
wait_for "the job has ended, with node-failure" 20 sh -c "banyan job eventlog $id | grep -q node-failure"
wait_for "and rank 0's own task is gone too" 15 tasks_are 0
new=$(banyan submit -N4 -n4 true)
check "a new job runs on all four ranks" banyan job wait "$new"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
