#!/bin/bash
# An event lost between brokers is detected, logged and replayed. Two
# configured brokers; a subscriber on rank 1 waits for three events. Rank 1
# is stopped (SIGSTOP) past tbon.lost_timeout, so rank 0 drops it and the
# second event is published while it is cut off; resumed, it rejoins,
# sees the gap, asks rank 0 for what it missed, and its subscriber gets
# all three events, in order, once each. After a restart of rank 0, which
# numbers events from 1 again, rank 1 still delivers them. Then, in a
# chain of three brokers, rank 2's event.replay meets a stopped rank 0:
# unanswered within tbon.replay_timeout it is asked again, and once rank 0
# goes on the subscriber on rank 2 gets every event once; after a restart
# of rank 0, rank 2 delivers the events it numbers anew.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 2 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1s"\nlost_timeout = "2s"'
BANYAN_URI=$(uri_of 1) banyan-test-client events lost. 3 >"$T_DIR/got" 2>&1 &
subscriber=$!
wait_for "rank 1's subscriber is subscribed" 10 grep -q subscribed "$T_DIR/got"
banyan-test-client rpc event.publish '{"topic": "lost.one"}' >/dev/null
wait_for "the first event reaches rank 1" 10 grep -q "lost.one" "$T_DIR/got"
rank1=$(broker_pid "$T_DIR" 1)
kill -STOP "$rank1"
wait_for "rank 1 is lost" 15 sh -c "banyan overlay status -s | grep -q '^lost: 1 (1)$'"
banyan-test-client rpc event.publish '{"topic": "lost.two"}' >/dev/null
kill -CONT "$rank1"
wait_for "rank 1 is back" 30 all_up 2
banyan-test-client rpc event.publish '{"topic": "lost.three"}' >/dev/null
wait "$subscriber"
check_output "the subscriber got all three, in order" "^one two three $" \
    sh -c "grep lost. $T_DIR/got | sed 's/.*lost\.//' | tr '\n' ' '"
check_output "with consecutive sequence numbers" "^yes$" \
    sh -c "grep lost. $T_DIR/got | awk 'NR > 1 && \$1 != prev + 1 {bad = 1} {prev = \$1} END {print bad ? \"no\" : \"yes\"}'"
check_output "rank 1 logged the gap and the replay" "resynchronised: events 2 to 2 replayed" cat "$T_DIR/rank-1.log"
# event_after_rank0_restart CONFIG SIZE RANK FILE: a subscriber on RANK
# (output in FILE) waits for one event published once rank 0 is killed
# and started again, and so numbers events from 1 again.
event_after_rank0_restart() {
    BANYAN_URI=$(uri_of "$3") banyan-test-client events after. 1 >"$4" 2>&1 &
    local subscriber=$!
    wait_for "rank $3's subscriber is subscribed again" 10 grep -q subscribed "$4"
    kill -9 "$(broker_pid "$T_DIR" 0)"
    start_broker "$1" 0
    wait_for "rank 0 is back" 30 all_up "$2"
    banyan-test-client rpc event.publish '{"topic": "after.restart"}' >/dev/null
    wait_for "the event published after it reaches rank $3" 10 grep -q "after.restart" "$4"
    kill "$subscriber" 2>/dev/null
    wait "$subscriber" 2>/dev/null
}
event_after_rank0_restart "$T_DIR/c.toml" 2 1 "$T_DIR/got2"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"

# A chain 0 <- 1 <- 2, long lost timeouts: nobody drops anybody while
# rank 0 is stopped. Rank 2, held stopped, misses an event while rank 1 is
# killed and started again; resumed, it rejoins the new rank 1, sees the
# gap, and asks rank 0, which is stopped by then.
write_config "$T_DIR/chain.toml" 3 "$(free_port)" "$T_DIR/cert" $'heartbeat_period = "0.2s"\nlost_timeout = "30s"\nreplay_timeout = "1s"'
sed -i 's/^fanout = 2$/fanout = 1/' "$T_DIR/chain.toml"
for r in 0 1 2; do start_broker "$T_DIR/chain.toml" $r; done
wait_for "a chain of 3 brokers is up" 20 all_up 3
BANYAN_URI=$(uri_of 2) banyan-test-client events chain. 3 >"$T_DIR/got3" 2>&1 &
subscriber=$!
wait_for "rank 2's subscriber is subscribed" 10 grep -q subscribed "$T_DIR/got3"
banyan-test-client rpc event.publish '{"topic": "chain.one"}' >/dev/null
wait_for "the first event reaches rank 2" 10 grep -q "chain.one" "$T_DIR/got3"
rank0=$(broker_pid "$T_DIR" 0)
rank2=$(broker_pid "$T_DIR" 2)
kill -STOP "$rank2"
kill -9 "$(broker_pid "$T_DIR" 1)"
wait_for "rank 0 has rank 1 lost" 15 sh -c "banyan overlay status -s | grep -q '^lost: 1-2 (2)$'"
banyan-test-client rpc event.publish '{"topic": "chain.two"}' >/dev/null
start_broker "$T_DIR/chain.toml" 1
wait_for "rank 1 is back" 15 sh -c "banyan overlay status -s | grep -q '^online: 0-1 (2)$'"
kill -STOP "$rank0"
kill -CONT "$rank2"
wait_for "rank 2 asks again when rank 0 does not answer within 1s" 20 \
    grep -q "event.replay of events 2 to 2: no answer from rank 0 within 1s; asking again" "$T_DIR/rank-2.log"
kill -CONT "$rank0"
wait_for "all three are up" 20 all_up 3
banyan-test-client rpc event.publish '{"topic": "chain.three"}' >/dev/null
wait "$subscriber"
check_output "rank 2's subscriber got all three, in order, once each" "^one two three $" \
    sh -c "grep chain. $T_DIR/got3 | sed 's/.*chain\.//' | tr '\n' ' '"
check_output "rank 2 replayed the event it missed" "resynchronised: events 2 to 2 replayed" cat "$T_DIR/rank-2.log"

# Rank 0 restarts again. Rank 1 learns it in its hello; rank 2, whose
# parent did not change, is told by rank 1 (RENUMBER), or it would drop
# the new events as seen until their numbers passed its 3.
event_after_rank0_restart "$T_DIR/chain.toml" 3 2 "$T_DIR/got4"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
