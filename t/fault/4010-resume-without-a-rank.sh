#!/bin/bash
# Rank 0 started again while a rank of a running job is still down (jobs.md
# §8): with broker.quorum = 1 it resumes at once, and the job waits for the
# missing rank up to exec.reattach-timeout (6 s here), as for a rank lost
# while it runs. Back within it, the rank's broker adopts its shell and
# the job runs on to its own end; not back, the job ends with
# node-failure, saying the rank was not online when rank 0 started again,
# and the task left there is ended when the rank comes back.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 2 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1s"\nlost_timeout = "2s"\n[exec]\nreattach-timeout = "6s"\n[broker]\nquorum = 1'
marker=$((RANDOM + 1000))
write_waiting_task
tasks_are() { waiting_tasks_are "$T_DIR/go-$marker" "$1"; }
# A job on both ranks, both brokers killed, rank 0 alone started again;
# sets id and resumed (when).
rank0_resumes_alone() {
    job_on_both
    kill -9 "$(broker_pid "$T_DIR" 1)" "$(broker_pid "$T_DIR" 0)"
    start_broker "$T_DIR/c.toml" 0
    resumed=$SECONDS
    wait_for "rank 0 resumes without rank 1 and waits for it" 20 grep -q \
        "$id: rank 1 lost (rank 1 was not online when rank 0 started again): waiting up to 6s" "$T_DIR/rank-0.log"
}

# 1. Back in time.
rank0_resumes_alone
check_output "the job still runs" "^$id R$" sh -c "banyan jobs --no-header -o '{id} {st}' | grep '^$id '"
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 re-attached its shell" 20 grep -q "$id: re-attached its shell" "$T_DIR/rank-1.log"
check "within exec.reattach-timeout" test $((SECONDS - resumed)) -lt 6
check "both tasks still run" tasks_are 2
runs_on_to_its_end

# 2. Not back in time.
rank0_resumes_alone
wait_for "the job ends with node-failure" 20 \
    sh -c "banyan job eventlog $id | grep -q 'exception.*type=node-failure'"
check "not before exec.reattach-timeout (6 s)" test $((SECONDS - resumed)) -ge 6
check_output "the eventlog says why" \
    "rank 1 was lost and not back within 6s \(exec.reattach-timeout\): rank 1 was not online when rank 0 started again" \
    banyan job eventlog "$id"
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 is back" 30 all_up 2
wait_for "its task on rank 1 is ended: none left" 15 tasks_are 0
new=$(banyan submit -N2 -n2 true)
check "a new job runs on both ranks" banyan job wait "$new"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
