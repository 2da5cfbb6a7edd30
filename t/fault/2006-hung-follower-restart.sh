#!/bin/bash
# Late news from a follower that hung while rank 0 restarted. Two
# configured brokers; a job runs on both; rank 1 is stopped (SIGSTOP), rank
# 0 killed with SIGKILL and started again on the same state directory; the
# job's tasks end meanwhile (rank 1's share exits 5, rank 0's 4); rank 1
# resumes. The job gets its real status and is not ended by the restart,
# and a new job runs and finishes as itself: rank 1's answers to the old
# rank 0 never reach the new one's requests (a new process numbers its
# requests from 1 again, and a late answer once ended a fresh job as
# "finish status=137" before it started).
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 2
nap=2.$((RANDOM % 9000 + 1000))  # (a name no other test's process has)
old=$(banyan submit -N2 -n2 sh -c "sleep $nap; exit \$((BANYAN_TASK_RANK + 4))")
wait_for "a job runs on both ranks" 20 sh -c "banyan job eventlog $old | grep -q ' start'"
rank1=$(broker_pid "$T_DIR" 1)
kill -STOP "$rank1"
kill -9 "$(broker_pid "$T_DIR" 0)"
start_broker "$T_DIR/c.toml" 0
wait_for "the tasks end while rank 1 is stopped" 10 sh -c "! pgrep -f '^sleep $nap\$'"
kill -CONT "$rank1"
wait_for "rank 0 is back, rank 1 with it" 30 all_up 2
check "the old job ends with its real status, 5" sh -c "banyan job wait $old; [ \$? -eq 5 ]"
check_output "re-attached, not ended by the restart" "reattach ranks=0-1" banyan job eventlog "$old"
check "with no exception" lacks exception banyan job eventlog "$old"
new=$(banyan submit -N2 -n2 true)
check "a new job runs and completes as itself" banyan job wait "$new"
check_output "with its own start and finish" "^start finish=0$" \
    sh -c "banyan job eventlog $new | awk '\$2 == \"start\" {s = \$2} \$2 == \"finish\" {f = \$3} END {print s, \"finish=\" substr(f, 8)}'"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
