#!/bin/bash
# What one local connection or one user can make rank 0 hold is bounded,
# and reading is linear: a client that writes requests and never reads the
# answers is no longer read past a few MiB (it waits in write) while rank 0
# answers everyone else; a message whose frames add up past the 16 MiB
# limit is dropped once its lengths say so; a guest may hold at most
# broker.connections-per-user connections, and one more gets one clear line.
. "$(dirname "$0")/lib.sh"

cat >"$T_DIR/inside.sh" <<'SCRIPT'
set -u
dir=$(instance_dir)
pid=$(broker_pid "$dir" 0)
rss_mb() { awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status"; }
before=$(rss_mb)
banyan-test-client flood 256 >"$T_DIR/flood.out" &
flooder=$!
sleep 0.5
check_output "rank 0 answers others while a client floods it" "rank=0" banyan ping 0
wait $flooder
check_output "a client writing 256 MiB of requests, reading no answer, is no longer read past a few MiB" \
    "took ([0-9]|[1-2][0-9]) MiB of 256 and stopped reading" cat "$T_DIR/flood.out"
check "rank 0 grew by less than 64 MB meanwhile ($before MB before, $(rss_mb) MB after)" \
    test $(($(rss_mb) - before)) -lt 64
check_output "a message of 68 frames of 16 MiB is dropped once its lengths pass 16 MiB" \
    "^huge: dropped after (1[6-9]|2[0-9]) MiB" banyan-test-client huge
check_output "rank 0 lives on" "rank=0" banyan ping 0
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    chmod 755 "$dir"
    guest() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
    check_output "a guest's connections past broker.connections-per-user=8 are refused in one line" \
        "^connections: 8 of 12 answered; refused: too many connections of uid [0-9]+ to this broker \(at most 8: broker.connections-per-user\)$" \
        guest banyan-test-client connections 12
    check_output "the owner is not limited" "^connections: 12 of 12 answered$" banyan-test-client connections 12
    check_output "a guest's closed connections count no more" "^connections: 8 of 8 answered$" \
        guest banyan-test-client connections 8
    check_fails "a refused guest's command says why in one line" \
        "^banyan jobs: too many connections of uid [0-9]+ to this broker" \
        guest bash -c 'banyan-test-client connections 8 3 >/dev/null & sleep 1; banyan jobs; s=$?; wait; exit $s'
fi
SCRIPT
banyan start --test-size=1 -S broker.connections-per-user=8 bash "$T_DIR/inside.sh"
