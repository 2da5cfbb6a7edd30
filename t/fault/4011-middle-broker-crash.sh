#!/bin/bash
# kill -9 of a broker with a broker below it while a job runs on both
# (README, banyan-broker(8)). Started again within tbon.lost_timeout, it
# adopts its shells, its child joins it again before it gives up on its
# parent, and the job runs on to its own end on every rank with no
# exception; a subscriber on the child gets each event once. Four
# configured brokers, fanout 2: rank 3 is under rank 1.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 4 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1s"\nlost_timeout = "8s"\n[exec]\nreattach-timeout = "20s"'
check_output "rank 3 is under rank 1" "joined parent rank 1" cat "$T_DIR/rank-3.log"
marker=$((RANDOM + 1000))
write_waiting_task
tasks_are() { waiting_tasks_are "$T_DIR/go-$marker" "$1"; }
id=$(banyan submit -N4 -n4 bash "$T_DIR/task.sh" "$T_DIR/go-$marker")
wait_for "a job runs on all four ranks" 20 tasks_are 4
BANYAN_URI=$(uri_of 3) banyan-test-client events mid. 3 >"$T_DIR/got" 2>&1 &
subscriber=$!
wait_for "a subscriber on rank 3 is subscribed" 10 grep -q subscribed "$T_DIR/got"
for e in one two; do banyan-test-client rpc event.publish "{\"topic\": \"mid.$e\"}" >/dev/null; done
wait_for "two events reach it" 10 sh -c "[ \$(grep -c mid. $T_DIR/got) -eq 2 ]"
kill -9 "$(broker_pid "$T_DIR" 1)"
killed=$SECONDS
# Rank 0 held, so that rank 3 says hello to the new rank 1 before rank 1
# has joined rank 0 and knows an event sequence.
rank0=$(broker_pid "$T_DIR" 0)
kill -STOP "$rank0"
start_broker "$T_DIR/c.toml" 1
wait_for "rank 3 joins the new rank 1 while rank 0 is held" 10 \
    sh -c "[ \$(grep -c 'joined parent rank 1' $T_DIR/rank-3.log) -ge 2 ]"
kill -CONT "$rank0"
wait_for "rank 1 re-attached its shell" 20 grep -q "$id: re-attached its shell" "$T_DIR/rank-1.log"
wait_for "all four are up again" 30 all_up 4
# Rank 1, started again, knew no event sequence when rank 3 said hello:
# rank 3 must not take it for a rank 0 numbering anew, and deliver again.
banyan-test-client rpc event.publish '{"topic": "mid.three"}' >/dev/null
wait_for "a third event reaches rank 3" 10 grep -q "mid.three" "$T_DIR/got"
wait "$subscriber"
check_output "rank 3's subscriber got each event once, in order" "^one two three $" \
    sh -c "grep mid. $T_DIR/got | sed 's/.*mid\.//' | tr '\n' ' '"
check "within tbon.lost_timeout (8 s)" test $((SECONDS - killed)) -lt 8
check "all four tasks still run" tasks_are 4
check "rank 3 kept its task" lacks "killing its tasks" cat "$T_DIR/rank-3.log"
touch "$T_DIR/go-$marker"
check "the job ends on its own, with status 0" timeout 30 banyan job wait "$id"
check "no exception was raised" lacks "exception" banyan job eventlog "$id"
check_output "every task wrote to its end" "^4$" sh -c "banyan job attach $id | grep -c ' ends$'"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
