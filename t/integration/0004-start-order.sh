#!/bin/bash
# A configured cluster comes up in any start order: followers started
# before rank 0 retry until it appears. With broker.quorum below the size,
# rank 0 runs once the quorum is there; a late rank joins afterwards.
# With broker.stop-keeps-jobs = false, SIGTERM at rank 0 stops them all
# (t/fault/4007 has the default, where it leaves alone).
. "$(dirname "$0")/lib.sh"
need_tools python3

banyan keygen "$T_DIR/cert" >/dev/null
port=$(free_port)
write_config "$T_DIR/c.toml" 5 "$port" "$T_DIR/cert" $'[broker]\nquorum = 4\nstop-keeps-jobs = false'

for r in 4 3 2 1; do start_broker "$T_DIR/c.toml" $r; done
sleep 1
check_output "followers started first wait for rank 0, without giving up" "." pgrep -f -- "--rundir $T_DIR/rank-4( |$)"
mkdir -p "$T_DIR/rank-0"
banyan start --config "$T_DIR/c.toml" --rank 0 --rundir "$T_DIR/rank-0" >>"$T_DIR/rank-0.log" 2>&1 &
wait_for "rank 0 (banyan start --config) starts last and all followers join" 10 \
    sh -c "BANYAN_URI=$(uri_of 0) banyan overlay status -s | grep -q '^online: 0-4 (5)$'"
kill -TERM "$(broker_pid "$T_DIR" 0)"
no_brokers_left "SIGTERM at rank 0 stops every broker" "$T_DIR"
check_output "rank 0 saw its children leave cleanly" "rank 2 is offline: left" cat "$T_DIR/rank-0.log"
check_output "rank 1 saw its own children leave before it did" "rank 4 is offline: left" cat "$T_DIR/rank-1.log"

# Quorum 4 of 5: rank 4 starts late.
for r in 0 1 2 3; do start_broker "$T_DIR/c.toml" $r; done
wait_for "rank 0's socket is there" 10 test -S "$T_DIR/rank-0/local.sock"
check_output "quorum reached without rank 4" '"online":4' \
    env BANYAN_URI="$(uri_of 0)" timeout 10 banyan-test-client rpc broker.ready '{}'
check_output "rank 4 is shown offline" "^offline: 4 \(1\)$" env BANYAN_URI="$(uri_of 0)" banyan overlay status -s
# The late rank runs as systemd's Type=notify would (banyan.service): it
# says READY=1 once it has joined, STOPPING=1 as it exits.
python3 - "$T_DIR/notify.sock" >"$T_DIR/notify.got" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("listening", flush=True)
while True:
    d = s.recv(4096).decode()
    print(d.replace("\n", "|"), flush=True)
    if d.startswith("STOPPING=1"):
        break
PY
listener=$!
wait_for "a notification socket listens" 10 grep -q listening "$T_DIR/notify.got"
NOTIFY_SOCKET=$T_DIR/notify.sock start_broker "$T_DIR/c.toml" 4
wait_for "the late rank joins" 10 sh -c "BANYAN_URI=$(uri_of 0) banyan overlay status -s | grep -q '^online: 0-4 (5)$'"
wait_for "it notifies the service manager that it is ready" 10 \
    grep -q "^READY=1|STATUS=rank 4 of 5: running$" "$T_DIR/notify.got"
check "shutdown again" env BANYAN_URI="$(uri_of 0)" banyan shutdown
no_brokers_left "every broker exited again" "$T_DIR"
wait_for "and that it stops as it exits" 10 grep -q "^STOPPING=1$" "$T_DIR/notify.got"
kill "$listener" 2>/dev/null || true  # (it has ended already, as a rule)
