#!/bin/bash
# Answers to a request of an earlier rank-0 process never reach this one's
# requests: a restarted broker numbers its requests from 1 again, and rank
# 1's late answer to the old exec.run once ended a fresh job as
# "finish status=137" before it started. Two configured brokers; a job
# runs on both; rank 0 is killed with SIGKILL and started again on the
# same state directory; rank 1's answer for the old job is dropped and
# logged, and a new job runs and finishes as itself.
. "$(dirname "$0")/lib.sh"

start_cluster 2
old=$(banyan submit -N2 -n2 sleep 60)
wait_for "a job runs on both ranks" 20 sh -c "banyan jobs --no-header -o '{st}' | grep -q '^R$'"
kill -9 "$(pgrep -f -- "--rundir $T_DIR/rank-0( |$)")"
start_broker "$T_DIR/c.toml" 0
wait_for "rank 0 is back, rank 1 with it" 30 all_up 2
wait_for "the old job ends with the restart" 20 \
    sh -c "banyan job eventlog $old | grep -q 'exception.*type=restart'"
wait_for "rank 1's answer to the old process's exec.run is dropped, and logged" 20 \
    grep -q "dropped an answer (exec.run) to a request of an earlier process of rank 0" "$T_DIR/rank-0.log"
new=$(banyan submit -N2 -n2 true)
check "a new job runs and completes as itself" banyan job wait "$new"
check_output "with its own start and finish" "^start finish=0$" \
    sh -c "banyan job eventlog $new | awk '\$2 == \"start\" {s = \$2} \$2 == \"finish\" {f = \$3} END {print s, \"finish=\" substr(f, 8)}'"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
