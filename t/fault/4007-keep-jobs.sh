#!/bin/bash
# Brokers that stop cleanly keep their jobs (doc/spec/overlay.md §9):
# `banyan shutdown --keep-jobs` stops every broker and leaves the jobs'
# shells running; SIGTERM (systemctl stop or restart) makes one broker,
# rank 0 included, leave alone the same way. Started again within
# exec.reattach-timeout, the brokers re-attach the shells and the job runs
# on to its own end. `banyan shutdown` without it ends the jobs, and so
# does SIGTERM with broker.stop-keeps-jobs = false (the old way).
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 2 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1s"\nlost_timeout = "2s"\n[exec]\nreattach-timeout = "30s"'
marker=$((RANDOM + 1000))
write_waiting_task
tasks_are() { waiting_tasks_are "$T_DIR/go-$marker" "$1"; }

# 1. banyan shutdown --keep-jobs, then every broker started again, in
# either order (banyan-shutdown(1)).
for order in "1 0" "0 1"; do
    # (This pass's lines only: the brokers append, O_APPEND, to emptied logs.)
    for rank in 0 1; do : >"$T_DIR/rank-$rank.log"; done
    job_on_both
    check "banyan shutdown --keep-jobs" banyan shutdown --keep-jobs
    no_brokers_left "every broker exited" "$T_DIR"
    check "both tasks still run, with no broker" tasks_are 2
    check_output "rank 0 said it keeps the jobs" "shutting down, keeping the jobs: requested by uid" \
        cat "$T_DIR/rank-0.log"
    check_output "rank 1 left its shell running" "leaving 1 job shells running, to be re-attached" \
        cat "$T_DIR/rank-1.log"
    for rank in $order; do
        start_broker "$T_DIR/c.toml" "$rank"
        wait_for "rank $rank, started first or second ($order), re-attached its shell" 20 \
            grep -q "$id: re-attached its shell" "$T_DIR/rank-$rank.log"
    done
    wait_for "both brokers are back" 30 all_up 2
    check "both tasks still run" tasks_are 2
    runs_on_to_its_end
done

# 2. SIGTERM at a follower (systemctl restart on its node).
job_on_both
kill -TERM "$(broker_pid "$T_DIR" 1)"
wait_for "rank 1 is offline, not lost" 10 sh -c "banyan overlay status -s | grep -q '^offline: 1 '"
check "both tasks still run" tasks_are 2
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 is back" 30 all_up 2
runs_on_to_its_end

# 3. SIGTERM at rank 0: it leaves alone; rank 1 and the tasks stay.
job_on_both
rank1=$(broker_pid "$T_DIR" 1)
kill -TERM "$(broker_pid "$T_DIR" 0)"
wait_for "rank 0 exited" 10 sh -c "! pgrep -f -- '--rundir $T_DIR/rank-0( |\$)' >/dev/null"
check "rank 1 stays" kill -0 "$rank1"
check "both tasks still run" tasks_are 2
start_broker "$T_DIR/c.toml" 0
wait_for "rank 0 is back" 30 all_up 2
check "rank 1 is the same broker" kill -0 "$rank1"
runs_on_to_its_end

# 4. banyan shutdown without --keep-jobs ends them.
job_on_both
check "banyan shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
wait_for "the tasks were ended" 10 tasks_are 0

# 5. broker.stop-keeps-jobs = false: SIGTERM at a follower ends its tasks,
# and at rank 0 stops every broker, ending theirs.
sed -i 's/^\[exec\]$/[broker]\nstop-keeps-jobs = false\n[exec]/' "$T_DIR/c.toml"
start_broker "$T_DIR/c.toml" 0
start_broker "$T_DIR/c.toml" 1
wait_for "both brokers are up" 30 all_up 2
wait_for "the job of scenario 4 is not running again: its tasks are gone" 20 \
    sh -c "banyan jobs -a --no-header -o '{id} {st}' | grep -q '^$id [^R]'"
job_on_both
kill -TERM "$(broker_pid "$T_DIR" 1)"
wait_for "SIGTERM at rank 1 ended its task" 10 tasks_are 1
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 is back" 30 all_up 2
wait_for "back without the job's task, rank 1 has the job end: rank 0's task goes too" 30 tasks_are 0
job_on_both
kill -TERM "$(broker_pid "$T_DIR" 0)"
no_brokers_left "SIGTERM at rank 0 stops every broker, rank 1 included" "$T_DIR"
wait_for "and ends both tasks" 10 tasks_are 0
