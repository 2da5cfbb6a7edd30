#!/bin/bash
# Liveness in an 8-broker instance: a stopped broker turns torpid and back;
# kill -9 makes it lost at once and fails the RPCs in flight through it with
# EHOSTUNREACH; a restarted broker (new uuid) is taken back and its subtree
# rejoins; a follower that exits cleanly is offline, not lost.
. "$(dirname "$0")/lib.sh"

inside() {
    dir=$(instance_dir)
    echo "$dir" >"$T_DIR/instance"
    pid3=$(broker_pid "$dir" 3)
    check "found rank 3's broker" test -n "$pid3"

    kill -STOP "$pid3"
    wait_for "a stopped broker becomes torpid" 10 sh -c "banyan overlay status -s | grep -q '^torpid: 3 '"
    check_output "overlay status shows rank 1's subtree degraded" "├─ 1: degraded" banyan overlay status
    banyan ping 3 >"$T_DIR/inflight" 2>&1 &
    inflight=$!
    sleep 0.2
    start=$(date +%s%N)
    kill -KILL "$pid3"
    wait_for "kill -9: rank 3 and its subtree are lost" 5 sh -c "banyan overlay status -s | grep -q '^lost: 3,7 (2)'"
    lost_ms=$((($(date +%s%N) - start) / 1000000))
    echo "    lost detected after ${lost_ms} ms (lost_timeout is 30 s)"
    check "lost well before lost_timeout" test "$lost_ms" -lt 2000
    wait "$inflight"
    check_output "the RPC in flight through the lost rank failed with EHOSTUNREACH" \
        "^banyan ping: rank 3: rank 3 is lost$" cat "$T_DIR/inflight"
    check_fails "a new RPC to the lost rank fails at once" "rank 3 is lost" timeout 5 banyan ping 3
    check_fails "so does one to a rank behind it" "rank 3 is lost" timeout 5 banyan ping 7

    banyan-broker --config "$dir/instance.toml" --rank 3 --rundir "$dir/rank-3" --log-level warning &
    wait_for "the restarted rank 3 and its child 7 rejoin: all full" 10 \
        sh -c "banyan overlay status -s | grep -q '^online: 0-7 (8)$'"
    check_output "rank 7 answers through the new rank 3" "route=client!0!1!3!7 " banyan ping 7
    wait_for "rank 0 asked the rejoined ranks for their nodes: all 8 free" 10 \
        sh -c "banyan resource list | grep -Eq '^ +free +8 '"

    pid6=$(broker_pid "$dir" 6)
    kill -TERM "$pid6"
    wait_for "a follower that leaves cleanly is offline, not lost" 5 \
        sh -c "banyan overlay status -s | grep -q '^offline: 6 '"
    check_output "rank 2's subtree is partial" "└─ 2: partial" banyan overlay status
    check_fails "an RPC to the offline rank fails at once" "rank 6 is offline" timeout 5 banyan ping 6
}
export -f inside

if banyan start --test-size=8 -S tbon.torpid_timeout=0.5s -S tbon.heartbeat_period=0.1s -S tbon.lost_timeout=30s \
    bash -c inside; then ok "liveness instance ran"; else not_ok "liveness instance ran"; fi
no_brokers_left "no broker is left, the restarted one included" "$(cat "$T_DIR/instance")"
