#!/bin/bash
# A follower cut off long enough to be lost, and not back within
# exec.reattach-timeout, has its jobs ended with node-failure; when it
# comes back its shells must not run on: rank 0 tells it which jobs still
# run there (exec.reconcile) and it kills the others' tasks. So are those
# of jobs rank 0 never had (its state directory wiped). Two
# configured brokers; rank 1 is stopped (SIGSTOP) past tbon.lost_timeout
# (3 s) and the wait for it (2 s), then resumed.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 2 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1.5s"\nlost_timeout = "3s"\n[exec]\nreattach-timeout = "2s"'
marker=$((RANDOM + 1000))
id=$(banyan submit -N2 -n2 sleep "$marker")
wait_for "a job runs on both ranks" 20 sh -c "[ \$(pgrep -fc '^sleep $marker\$') -eq 2 ]"
rank1=$(broker_pid "$T_DIR" 1)
kill -STOP "$rank1"
wait_for "rank 1 is lost and its job ends with node-failure" 20 \
    sh -c "banyan job eventlog $id | grep -q 'exception.*type=node-failure'"
kill -CONT "$rank1"
wait_for "rank 1 is back" 30 all_up 2
wait_for "the ended job's task on rank 1 is killed, none left" 15 sh -c "! pgrep -f '^sleep $marker\$'"
# (Stopped past exec.reattach-timeout, rank 1 may also find itself cut off
# as it resumes, and kill them before it is back: doc/spec/shell.md §8.)
check_output "rank 1 said why" \
    "rank 0 has no such job running on rank 1 \(it ended while the rank was away|rank 1 has not reached rank 0 for 2s" cat "$T_DIR/rank-1.log"
new=$(banyan submit -N2 -n2 true)
check "a new job runs on both ranks" banyan job wait "$new"

# Jobs rank 0 never had: both brokers killed while a job runs, and rank
# 0's state directory wiped before they start again. Their shells are
# adopted, and rank 0, which knows no such job, has them end their tasks,
# saying so in one line naming the rank and the job.
marker=$((marker + 1))
id=$(banyan submit -N2 -n2 sleep "$marker")
wait_for "another job runs on both ranks" 20 sh -c "[ \$(pgrep -fc '^sleep $marker\$') -eq 2 ]"
state=$(state_dir "$T_DIR")
kill -9 "$(broker_pid "$T_DIR" 1)" "$(broker_pid "$T_DIR" 0)"
rm -rf "$state"
start_broker "$T_DIR/c.toml" 0
start_broker "$T_DIR/c.toml" 1
wait_for "both are back, with a new state" 30 all_up 2
wait_for "the unknown job's tasks are killed on both ranks, none left" 20 sh -c "! pgrep -f '^sleep $marker\$'"
# (Its shells wait 2 s, exec.reattach-timeout: a restart slower than that
# finds them gone, ended by themselves.)
for r in 0 1; do
    check_output "rank $r said why, naming the job" \
        "$id: (rank 0 has no such job running on rank $r|no broker came back within 2s)" cat "$T_DIR/rank-$r.log"
done
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
