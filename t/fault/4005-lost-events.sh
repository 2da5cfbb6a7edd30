#!/bin/bash
# An event lost between brokers is detected, logged and replayed. Two
# configured brokers; a subscriber on rank 1 waits for three events. Rank 1
# is stopped (SIGSTOP) past tbon.lost_timeout, so rank 0 drops it and the
# second event is published while it is cut off; resumed, it rejoins,
# sees the gap, asks rank 0 for what it missed, and its subscriber gets
# all three events, in order, once each. After a restart of rank 0, which
# numbers events from 1 again, rank 1 still delivers them.
. "$(dirname "$0")/../integration/lib.sh"

start_cluster 2 $'heartbeat_period = "0.2s"\ntorpid_timeout = "1s"\nlost_timeout = "2s"'
BANYAN_URI=$(uri_of 1) banyan-test-client events lost. 3 >"$T_DIR/got" 2>&1 &
subscriber=$!
wait_for "rank 1's subscriber is subscribed" 10 grep -q subscribed "$T_DIR/got"
banyan-test-client rpc event.publish '{"topic": "lost.one"}' >/dev/null
wait_for "the first event reaches rank 1" 10 grep -q "lost.one" "$T_DIR/got"
rank1=$(pgrep -f -- "--rundir $T_DIR/rank-1( |$)")
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
BANYAN_URI=$(uri_of 1) banyan-test-client events after. 1 >"$T_DIR/got2" 2>&1 &
subscriber=$!
wait_for "rank 1's subscriber is subscribed again" 10 grep -q subscribed "$T_DIR/got2"
kill -9 "$(pgrep -f -- "--rundir $T_DIR/rank-0( |$)")"
start_broker "$T_DIR/c.toml" 0
wait_for "rank 0 is back" 30 all_up 2
banyan-test-client rpc event.publish '{"topic": "after.restart"}' >/dev/null
wait "$subscriber"
check_output "after rank 0 restarts (numbering from 1 again), rank 1 still delivers events" "after.restart" \
    cat "$T_DIR/got2"
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
