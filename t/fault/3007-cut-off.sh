#!/bin/bash
# A rank cut off from its parent for tbon.lost_timeout is lost to rank 0,
# which ends its jobs and those of every rank below it (node-failure): the
# cut-off rank kills their tasks itself, and has the ranks below it do so,
# without waiting to reach rank 0 again (which may never come). Four
# brokers (fanout 2: rank 3 under rank 1); rank 0 is stopped (SIGSTOP)
# past tbon.lost_timeout (3 s), so ranks 1 and 2 hear nothing from their
# parent; rank 3 still hears from its own.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 4 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1.5s"\nlost_timeout = "3s"'
marker=$((RANDOM + 1000))
id=$(banyan submit -N4 -n4 sleep "$marker")
wait_for "a job runs on all four ranks" 20 sh -c "[ \$(pgrep -fc '^sleep $marker\$') -eq 4 ]"
rank0=$(broker_pid "$T_DIR" 0)
kill -STOP "$rank0"
stopped=$SECONDS
wait_for "the tasks of ranks 1, 2 and 3 are killed while rank 0 is still away" 15 \
    sh -c "[ \$(pgrep -fc '^sleep $marker\$') -eq 1 ]"
check "not before tbon.lost_timeout (3 s)" test $((SECONDS - stopped)) -ge 3
check_output "rank 1 says why" "has not reached its parent for 3s \(tbon.lost_timeout\): rank 0 has ended this job" \
    cat "$T_DIR/rank-1.log"
check_output "rank 3, whose parent is there, was told by rank 1" \
    "rank 1, above rank 3, has not reached its parent for 3s" cat "$T_DIR/rank-3.log"
kill -CONT "$rank0"
wait_for "all ranks are back" 30 all_up 4
wait_for "the job has ended" 20 sh -c "banyan job eventlog $id | grep -q '^.* clean'"
wait_for "no task of it is left" 15 sh -c "! pgrep -f '^sleep $marker\$'"
new=$(banyan submit -N4 -n4 true)
check "a new job runs on all four ranks" banyan job wait "$new"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
