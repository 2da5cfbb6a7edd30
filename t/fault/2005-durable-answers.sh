#!/bin/bash
# What rank 0 acknowledges is on disk, and nothing starts before the event
# that allows it is. Every write of the job database is made 200 ms slower
# (t/fault/slow_disk.c, LD_PRELOAD: as on a busy or networked disk), and
# rank 0 is killed with SIGKILL at once after (1) a job's task ran and
# (2) a hold and a cancel were acknowledged. Restarted on the same state
# directory: the job that ran is not run again, the cancel and the hold
# are still there. Then a start held while its alloc is written (exec.run
# with `hold`), cancelled in that window, lost with rank 0 in it, and one
# whose shell dies in it; and `banyan job wait` after the end in memory.
. "$(dirname "$0")/../integration/lib.sh"

shim=${BANYAN_SLOW_DISK:-}
if [ -z "$shim" ] || [ ! -f "$shim" ]; then
    echo "no slow-disk shim (BANYAN_SLOW_DISK=$shim)"
    exit "$SKIP_CODE"
fi
if ldd "$(command -v banyan-broker)" | grep -q libasan; then
    echo "AddressSanitizer must be the first library loaded, so no LD_PRELOAD shim"
    exit "$SKIP_CODE"
fi
need_tools curl
export STATE=$T_DIR/state
slow() { LD_PRELOAD=$shim BANYAN_SLOW_DISK_MS=200 "$@"; }

cat >"$T_DIR/ran.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
banyan submit sh -c "echo run >>$T_DIR/c.runs; sleep 60" >c.id
wait_for "the job's task ran" 20 test -s c.runs
kill -9 "$(broker_pid "$(instance_dir)" 0)"
SCRIPT
slow banyan start --test-size=1 --statedir "$STATE" bash "$T_DIR/ran.sh" 2>"$T_DIR/start1.err"

cat >"$T_DIR/acked.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
banyan submit --urgency=0 true >a.id
banyan submit --dependency=afterany:"$(cat a.id)" sh -c "echo run >>$T_DIR/b.runs" >b.id
banyan job urgency "$(cat b.id)" hold >/dev/null
banyan cancel "$(cat a.id)"
kill -9 "$(broker_pid "$(instance_dir)" 0)"
SCRIPT
slow banyan start --test-size=1 --statedir "$STATE" bash "$T_DIR/acked.sh" 2>"$T_DIR/start2.err"

cat >"$T_DIR/after.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
st() { banyan jobs -a --no-header -o '{id} {st} {result}' | awk -v id="$1" '$1 == id {print $2, $3}'; }
wait_for "the job whose task ran before the crash ends with a restart exception" 20 \
    sh -c "banyan job eventlog $(cat c.id) | grep -q 'exception.*type=restart'"
sleep 1
check_output "its task ran once: it was not run again" "^1$" sh -c "wc -l <c.runs"
check_output "the acknowledged cancel is there" "^CA canceled$" st "$(cat a.id)"
sleep 2
check_output "the acknowledged hold is there: its dependency met, the job waits, held" "^S $" st "$(cat b.id)"
check "and it never ran" test ! -e b.runs
SCRIPT
banyan start --test-size=1 --statedir "$STATE" bash "$T_DIR/after.sh"

# banyan job wait answers once the job's end is on disk, also when the job
# is already inactive in memory as the wait arrives (its clean event still
# being written, 200 ms here): the eventlog read next holds it.
cat >"$T_DIR/wait.sh" <<'SCRIPT'
set -u
id=$(banyan submit true)
wait_for "the job is inactive in memory (its listing)" 20 \
    sh -c "banyan jobs -a --no-header -o '{id} {st}' | grep -q '^$id CD'"
banyan job wait "$id"
check_output "a wait that came after the end in memory answers after the disk" "clean" banyan job eventlog "$id"
SCRIPT
slow banyan start --test-size=1 bash "$T_DIR/wait.sh"

# While the alloc event is being written, exec.run goes out with `hold`
# (shell.md §7): the job's shell is ready, but no task starts before the
# event is on disk. A cancel in that window ends the job with no task
# run; rank 0 killed in it loses the start (the event never reached the
# disk), and after the restart the job runs, once. Each write and sync
# takes a second here, so the window is seconds wide.
slower() { LD_PRELOAD=$shim BANYAN_SLOW_DISK_MS=1000 "$@"; }
cat >"$T_DIR/held.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
broker=$(broker_pid "$(instance_dir)" 0)
# A job's shell (forked: the blanked flag; executed: no argument), not the fork server.
shell_ready() { pgrep -P "$broker" -f 'banyan-shell *$' >/dev/null; }
banyan submit sh -c "echo run >>$T_DIR/e.runs" >e.id
wait_for "a job's shell is ready while its alloc is written" 20 shell_ready
check "none of its tasks ran" test ! -e e.runs
# It has read its job and prepared it: its PMIx listener is open.
shell=$(pgrep -P "$broker" -f 'banyan-shell *$' | head -1)
wait_for "the held shell has prepared its job (a listening socket)" 10 \
    sh -c "ls -l /proc/$shell/fd | grep -q socket"
check "and still none of its tasks ran" test ! -e e.runs
banyan cancel "$(cat e.id)"
banyan job wait "$(cat e.id)" >/dev/null 2>&1
check_output "cancelled then, it ends canceled" "^CA canceled$" \
    sh -c "banyan jobs -a --no-header -o '{id} {st} {result}' | awk -v id=$(cat e.id) '\$1 == id {print \$2, \$3}'"
check "and its task never ran" test ! -e e.runs
# (its events as stored, which hold its submit: a failing eventlog is no pass)
check "it has no start event" sh -c "banyan job eventlog $(cat e.id) >events && grep -q ' submit ' events &&
    ! grep -q ' start\$' events"
banyan submit sh -c "echo run >>$T_DIR/d.runs; sleep 60" >d.id
wait_for "the next job's shell is ready while its alloc is written" 20 shell_ready
check "none of its tasks ran" test ! -e d.runs
kill -9 "$broker"
SCRIPT
slower banyan start --test-size=1 --statedir "$T_DIR/held-state" bash "$T_DIR/held.sh" 2>"$T_DIR/start3.err"
cat >"$T_DIR/held-after.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
wait_for "after the restart, the job whose start was lost runs" 20 test -s d.runs
check_output "once" "^1$" sh -c "wc -l <d.runs"
check "without a restart exception: it was pending again" \
    sh -c "banyan job eventlog $(cat d.id) >events && grep -q ' submit ' events && ! grep -q 'type=restart' events"
banyan cancel "$(cat d.id)"
SCRIPT
banyan start --test-size=1 --statedir "$T_DIR/held-state" bash "$T_DIR/held-after.sh"

# A held shell that dies before its exec.go (here a job shell that exits
# at once) fails the job's start with one exec exception, and the broker
# goes on.
cat >"$T_DIR/dying-shell" <<'EOF2'
#!/bin/sh
exit 1
EOF2
chmod +x "$T_DIR/dying-shell"
cat >"$T_DIR/dying.sh" <<'SCRIPT'
set -u
id=$(banyan submit true)
check_output "the job whose held shell died fails" "^exit [1-9]" sh -c "banyan job wait $id >/dev/null 2>&1; echo exit \$?"
check_output "with one exec exception naming the shell's end" "^1 .*exited with status 1" \
    sh -c "banyan job eventlog $id | grep -c ' exception ' | tr '\n' ' '; banyan job eventlog $id | grep ' exception '"
check_output "the broker goes on" "^$id" banyan jobs -a --no-header -o '{id}'
SCRIPT
slow banyan start --test-size=1 -S exec.job-shell="\"$T_DIR/dying-shell\"" bash "$T_DIR/dying.sh"

# A job's event stream (HTTP, follow: its eventlog, then the events
# streamed from the next seq) misses none: the eventlog is read once the
# events posted before it are on disk. With each sync slow, a job that
# runs at once has events posted and not yet stored when its stream
# begins; they were lost (neither read nor streamed).
cat >"$T_DIR/stream.sh" <<'SCRIPT'
set -u
url=http://$(banyan uptime | sed -n 's,.*http http://,,p')
token=$(banyan token create)
id=$(banyan submit true)
check_output "a job's event stream from its submit has every event, in order, to its end" \
    '^submit depend priority alloc start finish free clean end $' \
    sh -c "curl -s --max-time 30 -H 'Authorization: Bearer $token' '$url/api/v1/jobs/$id/eventlog?follow=1' |
           sed -n 's/^data: .*\"name\":\"\([a-z]*\)\".*/\\1/p; s/^event: end/end/p' | tr '\\n' ' '"
SCRIPT
LD_PRELOAD=$shim BANYAN_SLOW_DISK_MS=300 BANYAN_SLOW_DISK_SYNC_ONLY=1 \
    banyan start --test-size=1 -S http.listen=127.0.0.1:0 bash "$T_DIR/stream.sh"
