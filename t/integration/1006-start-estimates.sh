#!/bin/bash
# When a pending job will start (sched.md §6, banyan-jobs(1) --start): the
# scheduler's reserved start, as banyan jobs shows it, is when the job
# really starts, in a deterministic scenario: simulated jobs that each need
# the whole node and run just under their 6 s limit. EASY reserves the
# first blocked job, on a full node too; conservative every blocked job.
# Within 2 s: plans are in whole seconds from a start rounded down, and
# each job's end takes its own time to reach the scheduler.
. "$(dirname "$0")/lib.sh"

cat >"$T_DIR/chain.sh" <<'SCRIPT'
set -eu
for _ in 1 2 3; do banyan submit -N1 --exclusive -t 6s -S exec.test.run_duration=5.9 true; done >ids
banyan job wait-event "$(sed -n 1p ids)" start >/dev/null
banyan jobs --start --no-header -o '{id} {t_estimate}' >estimates
banyan jobs --start >start-table
banyan jobs --json >listing.json
banyan job wait --all
banyan jobs -a --no-header -o '{id} {t_run}' >started
SCRIPT

# estimate_error N: how far job N's reserved start (whole seconds) was from
# its real start, in seconds ("none" without an estimate).
estimate_error() {
    local id est run
    id=$(sed -n "${1}p" ids)
    est=$(awk -v id="$id" '$1 == id {print $2}' estimates)
    run=$(awk -v id="$id" '$1 == id {print $2}' started)
    [ -n "$est" ] || { echo none; return; }
    awk -v e="$est" -v r="$run" 'BEGIN {d = r - e; printf "%.2f\n", d < 0 ? -d : d}'
}
within_2s() { awk -v d="$1" 'BEGIN {exit !(d != "none" && d < 2.0)}'; }

cd "$T_DIR"
check "easy: three whole-node jobs run one after the other" \
    banyan start --test-size=1 -S 'sched.queue-policy="easy"' bash chain.sh
error=$(estimate_error 2)
check "easy: the first blocked job's reserved start is when it started ($error s off)" within_2s "$error"
check_output "easy: the next one has none (EASY reserves one job)" "^$(sed -n 3p ids) ?$" \
    grep "^$(sed -n 3p ids)" estimates
check_output "--start shows the expected start as local time" \
    "^ +$(sed -n 2p ids) .* S +1 [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8} insufficient resources$" \
    grep "$(sed -n 2p ids)" start-table
check_output "... and '-' for the job without one" "^ +$(sed -n 3p ids) .* S +1 +- priority$" \
    grep "$(sed -n 3p ids)" start-table
check_output "... and its own columns" "^ +JOBID USER +NAME +ST NNODES +START INFO$" head -1 start-table
check_output "--json carries t_estimate" "^$(grep "^$(sed -n 2p ids)" estimates | cut -d' ' -f2)$" \
    python3 -c "import json; print(*[j['t_estimate'] for j in json.load(open('listing.json')) if 't_estimate' in j])"

check "conservative: the same three" \
    banyan start --test-size=1 -S 'sched.queue-policy="conservative"' bash chain.sh
for n in 2 3; do
    error=$(estimate_error $n)
    check "conservative: job $n's reserved start is when it started ($error s off)" within_2s "$error"
done

check_fails "--start with -a is refused in one line" "^banyan jobs: --start lists pending jobs: give it without -f or -a$" \
    banyan start --test-size=1 banyan jobs --start -a
check_fails "... and with -f" "^banyan jobs: --start lists pending jobs: give it without -f or -a$" \
    banyan start --test-size=1 banyan jobs --start -f running
