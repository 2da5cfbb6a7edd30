#!/bin/bash
# The state directory's disk fills up: a submission is refused in one line
# within a second (not kept waiting), `banyan jobs` lists only what is on
# disk, the log does not fill with retries, and once there is space again
# the instance takes and runs jobs by itself, with no restart.
. "$(dirname "$0")/../integration/lib.sh"

if [ "$(id -u)" != 0 ]; then
    echo "mounting a small tmpfs for the state directory needs root"
    exit "$SKIP_CODE"
fi
export STATE=$T_DIR/state
mkdir -p "$STATE"
if ! mount -t tmpfs -o size=4m,mode=0700 tmpfs "$STATE"; then
    echo "cannot mount a tmpfs here"
    exit "$SKIP_CODE"
fi
CLEANUP+=("umount -l '$STATE'")

cat >"$T_DIR/inside.sh" <<'SCRIPT'
set -u
check "a job is submitted and runs while there is space" banyan submit --wait --quiet true
dd if=/dev/zero of="$STATE/filler" bs=64k >/dev/null 2>&1
start=$(date +%s%N)
check_fails "with the disk full a submission is refused in one line" \
    "^banyan submit: the job database cannot be written, nothing was submitted: .*jobs.db.*full$" banyan submit true
check "within a second ($((($(date +%s%N) - start) / 1000000)) ms)" test $((($(date +%s%N) - start) / 1000000)) -lt 1000
check_fails "and so is the next, at once" "^banyan submit: the job database cannot be written" banyan submit true
check_output "banyan jobs lists only the job on disk" "^1$" sh -c "banyan jobs -a --no-header | wc -l"
sleep 2
check_output "the log says so once, not ten times a second" "^1$" sh -c "banyan dmesg | grep -c 'commit failed'"
rm -f "$STATE/filler"
wait_for "once there is space again, submissions are taken and run" 10 banyan submit --wait --quiet true
check_output "two jobs listed" "^2$" sh -c "banyan jobs -a --no-header | wc -l"
check_output "the log says commits land again" "commits land again" banyan dmesg
SCRIPT
banyan start --test-size=1 --statedir "$STATE" bash "$T_DIR/inside.sh"
