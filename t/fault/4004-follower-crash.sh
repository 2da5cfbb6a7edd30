#!/bin/bash
# kill -9 of a follower broker while a job runs on it. Its shells outlive
# it and wait to be re-attached (doc/spec/shell.md §8), but rank 0 has lost
# the rank: the job ends with node-failure within the lost timeout. When
# the broker starts again on the same run directory it adopts the shell,
# is told the job ended (exec.reconcile), and kills its tasks: no task is
# left, and a new job runs on both ranks.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 2 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1s"\nlost_timeout = "2s"'
marker=$((RANDOM + 1000))
id=$(banyan submit -N2 -n2 sleep "$marker")
wait_for "a job runs on both ranks" 20 sh -c "[ \$(pgrep -fc '^sleep $marker\$') -eq 2 ]"
kill -9 "$(pgrep -f -- "--rundir $T_DIR/rank-1( |$)")"
killed=$(date +%s)
wait_for "the job ends with node-failure" 15 \
    sh -c "banyan job eventlog $id | grep -q 'exception.*type=node-failure'"
check "within the lost timeout and a little (2 s + 3 s)" test $(($(date +%s) - killed)) -le 5
check_output "rank 1's task outlived its broker, waiting to be re-attached" "^1$" pgrep -fc "^sleep $marker\$"
start_broker "$T_DIR/c.toml" 1
wait_for "rank 1 is back" 30 all_up 2
wait_for "its adopted task is killed: none left" 15 sh -c "! pgrep -f '^sleep $marker\$'"
check_output "rank 1 said why" "rank 0 ended this job while rank 1 was cut off" cat "$T_DIR/rank-1.log"
new=$(banyan submit -N2 -n2 true)
check "a new job runs on both ranks" banyan job wait "$new"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
