#!/bin/bash
# Rank 0 started again while a rank of a running job is still down (jobs.md
# §8): with broker.quorum = 1 it resumes at once, and the job waits for the
# missing rank up to exec.reattach-timeout (10 s here), as for a rank lost
# while it runs. Back within it, the rank's broker adopts its shell and
# the job runs on to its own end; not back within the job's own
# --reattach-timeout (2 s), the job ends with node-failure, saying the
# rank was not online when rank 0 started again, and the rank, back while
# its shell still waits, is told (exec.reconcile) and ends its task.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 2 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1s"\nlost_timeout = "2s"\n[exec]\nreattach-timeout = "10s"\n[broker]\nquorum = 1'
marker=$((RANDOM + 1000))
write_waiting_task
tasks_are() { waiting_tasks_are "$T_DIR/go-$marker" "$1"; }
# rank0_resumes_alone [SUBMIT OPTION...]: a job on both ranks, both
# brokers killed, rank 0 alone started again; sets id and resumed (when).
rank0_resumes_alone() {
    job_on_both "$@"
    kill -9 "$(broker_pid "$T_DIR" 1)" "$(broker_pid "$T_DIR" 0)"
    start_broker "$T_DIR/c.toml" 0
    resumed=$SECONDS
    wait_for "rank 0 resumes without rank 1 and waits for it" 20 grep -q \
        "$id: rank 1 lost (rank 1 was not online when rank 0 started again): waiting up to" "$T_DIR/rank-0.log"
}

# 1. Back in time.
rank0_resumes_alone
check_output "the job still runs" "^$id R$" sh -c "banyan jobs --no-header -o '{id} {st}' | grep '^$id '"
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 re-attached its shell" 20 grep -q "$id: re-attached its shell" "$T_DIR/rank-1.log"
check "within exec.reattach-timeout" test $((SECONDS - resumed)) -lt 10
check "both tasks still run" tasks_are 2
runs_on_to_its_end

# 2. Not back within the job's own tolerance, read back from the
# database by the new rank 0.
rank0_resumes_alone --reattach-timeout=2s
wait_for "the job ends with node-failure" 20 \
    sh -c "banyan job eventlog $id | grep -q 'exception.*type=node-failure'"
check "not before its --reattach-timeout (2 s)" test $((SECONDS - resumed)) -ge 2
check_output "the eventlog says why" \
    "rank 1 was lost and not back within 2s \(--reattach-timeout\): rank 1 was not online when rank 0 started again" \
    banyan job eventlog "$id"
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 is back" 30 all_up 2
wait_for "its task on rank 1 is ended: none left" 15 tasks_are 0
check_output "by the rank, told by rank 0 (its shell still waited)" \
    "$id: rank 0 has no such job running on rank 1" cat "$T_DIR/rank-1.log"
new=$(banyan submit -N2 -n2 true)
check "a new job runs on both ranks" banyan job wait "$new"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
