#!/bin/bash
# A start lost with rank 0 (doc/spec/shell.md §8, "A share that never
# came"): rank 0 dies after a job's alloc reached its disk but before the
# job's shells were let start. Rank 0's own held shell dies with it (or
# was never made); rank 1's waits (or its exec.run never came). The
# restarted rank 0 finds the job RUN; a rank that holds nothing of it says
# that no task of that run ever started there, and its share is sent
# again. The job runs once on each rank and ends 0, with no `restart`
# exception. Once the instance is up, rank 0's database syncs take 5 s
# (t/fault/slow_disk.c, writes at full speed), so the alloc is written and
# not yet synced for seconds: a SIGKILL then keeps it (the kernel has it)
# and loses the go.
. "$(dirname "$0")/../integration/lib.sh"

shim=${BANYAN_SLOW_DISK:-}
if [ -z "$shim" ] || [ ! -f "$shim" ]; then
    echo "no slow-disk shim (BANYAN_SLOW_DISK=$shim)"
    exit "$SKIP_CODE"
fi
if sanitized; then
    echo "AddressSanitizer must be the first library loaded, so no LD_PRELOAD shim"
    exit "$SKIP_CODE"
fi
banyan keygen "$T_DIR/cert" >/dev/null
write_config "$T_DIR/c.toml" 2 "$(free_port)" "$T_DIR/cert"
mkdir -p "$T_DIR/rank-0"
LD_PRELOAD=$shim BANYAN_SLOW_DISK_MS=5000 BANYAN_SLOW_DISK_SYNC_ONLY=1 BANYAN_SLOW_DISK_WHILE=$T_DIR/slow \
    banyan-broker --config "$T_DIR/c.toml" --rank 0 --rundir "$T_DIR/rank-0" >>"$T_DIR/rank-0.log" 2>&1 &
start_broker "$T_DIR/c.toml" 1
export BANYAN_URI=$(uri_of 0)
wait_for "2 brokers up" 20 all_up 2

cd "$T_DIR" || exit 1
touch slow
id=$(banyan submit -N2 -n2 sh -c 'echo "$BANYAN_TASK_RANK" >>runs')
check "the job was submitted" test -n "$id"
# The alloc event's row, in the write-ahead log before its sync ends.
wait_for "its alloc is written, its sync still under way" 20 grep -qa 'alloc{"R"' rank-0/state/jobs.db-wal
check "no task of it has run" test ! -e runs
kill -9 "$(broker_pid "$T_DIR" 0)"
start_broker "$T_DIR/c.toml" 0
wait_for "rank 0 is back" 30 all_up 2
check_output "the job ends 0" "^0$" sh -c "banyan job wait $id >/dev/null 2>&1; echo \$?"
check_output "each task ran once" "^0 1 $" sh -c "sort -n runs | tr '\n' ' '"
check "without a restart exception" sh -c "banyan job eventlog $id >events && grep -qw alloc events &&
    ! grep -q 'type=restart' events"
check_output "rank 0 sent its own share again, saying why" \
    "$id: rank 0 never had the job's share \(its start was lost\): sent again" cat rank-0.log
check "shutdown" banyan shutdown
no_brokers_left "every broker exited" "$T_DIR"
