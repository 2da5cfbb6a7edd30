#!/bin/bash
# Accounting (doc/spec/accounting.md): every job leaves a usage record,
# read with banyan history. What a job's tasks used agrees with
# /usr/bin/time's count of the same work; records outlive the purge and a
# kill -9 of rank 0, and one that did not reach the store is written when
# rank 0 starts again; none is written twice.
. "$(dirname "$0")/lib.sh"
[ -x /usr/bin/time ] || { echo "skip: /usr/bin/time (package time) is not installed"; exit 77; }

# The work: about a second of CPU and a 200 MiB resident set.
cat >"$T_DIR/work.py" <<'PY'
import time
b = bytearray(200 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
t = time.process_time()
x = 0
while time.process_time() - t < 1.0:
    x += 1
PY
/usr/bin/time -f '%U %S %M' -o "$T_DIR/time.out" python3 "$T_DIR/work.py"
read -r user_s sys_s max_kib <"$T_DIR/time.out"

export STATE=$T_DIR/state
cat >"$T_DIR/jobs.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
work=$(banyan submit -J work python3 "$T_DIR/work.py")
failed=$(banyan submit -J falls sh -c 'exit 3')
held=$(banyan submit -J never --urgency=0 true)
banyan cancel "$held"
banyan job wait "$work"
banyan job wait "$failed"
banyan job wait "$held" 2>/dev/null
for i in 1 2 3 4; do banyan submit -J small true; done >small.ids
banyan job wait --all
echo "$work" >work.id; echo "$failed" >failed.id; echo "$held" >held.id
wait_for "every record is stored (7)" 20 sh -c "[ \$(banyan history --no-header -o '{id}' | wc -l) -eq 7 ]"
banyan history --json >records.json
banyan history >table.out
banyan history -P -o '{id}{st}{status}{nnodes}' >parsable.out
banyan history -s F,canceled --no-header -o '{name}' | sort >failed-or-canceled.out
host=$(banyan history --no-header -o '{nodelist}' --name work)
banyan history --node "$host" --no-header -o '{name}' | sort -u | tr '\n' ' ' >on-node.out
banyan history --node no-such-host-7 --no-header >on-no-node.out
banyan jobs -a --no-header -o '{id}' >kept.ids
open_without_cloexec "$(broker_pid "$(instance_dir)" 0)" >fds.out
banyan bank add kept --shares 3 --max-cores 4
banyan bank add below --parent kept
banyan bank user add "$(id -un)" below --max-running-jobs 2
kill -9 "$(broker_pid "$(instance_dir)" 0)"
SCRIPT
banyan start --test-size=1 --statedir "$STATE" -S job-manager.inactive-limit=2 bash "$T_DIR/jobs.sh" 2>"$T_DIR/start1.err"

record() {  # record ID FIELD: FIELD of job ID's record, from --json
    python3 -c 'import json,sys; r=[r for r in json.load(open(sys.argv[1])) if r["jobid"]==sys.argv[2]][0]; print(r[sys.argv[3]])' \
        "$T_DIR/records.json" "$1" "$2"
}
fields() {  # fields ID FIELD...: those fields of job ID's record, on one line
    local id=$1 f out=()
    shift
    for f; do out+=("$(record "$id" "$f")"); done
    echo "${out[*]}"
}
work=$(cat "$T_DIR/work.id")
cpu=$(record "$work" cpu)
rss=$(record "$work" maxrss)
within() {  # within A B PERCENT: A is within PERCENT % of B
    python3 -c 'import sys; a,b,p=map(float,sys.argv[1:]); sys.exit(0 if abs(a-b) <= b*p/100 else 1)' "$@"
}
check "the work's CPU time ($cpu s) is /usr/bin/time's ($user_s + $sys_s s) within 10 %" \
    within "$cpu" "$(python3 -c "print($user_s + $sys_s)")" 10
check "its max RSS ($rss bytes) is /usr/bin/time's ($max_kib KiB) within 10 %" \
    within "$rss" "$((max_kib * 1024))" 10
check_output "it completed with status 0 on one node and core" '^completed 0 1 1 work$' \
    fields "$work" result status nnodes ncores name
check_output "its elapsed time covers its CPU time" '^ok$' \
    python3 -c "print('ok' if $(record "$work" elapsed) >= $cpu * 0.9 else 'short')"
check_output "the failing job: failed, status 3" '^failed 3$' fields "$(cat "$T_DIR/failed.id")" result status
check_output "the job canceled while held: canceled, never started, no status" '^canceled 0(\.0)? None 0$' \
    fields "$(cat "$T_DIR/held.id")" result t_start status nnodes
check_output "the table has sacct's columns" '^ +JOBID USER +NAME +ST STATUS NNODES NCORES +ELAPSED +CPU +MAXRSS END$' \
    head -1 "$T_DIR/table.out"
check_output "-P: the fields joined by |" "^$(cat "$T_DIR/failed.id")\|F\|3\|1$" cat "$T_DIR/parsable.out"
check_output "-s F,canceled selects by result" '^falls never$' sh -c "tr '\n' ' ' <'$T_DIR/failed-or-canceled.out' | sed 's/ $//'"
check_output "--node: the jobs that ran on its host (never is canceled unrun: not there)" '^falls small work $' cat "$T_DIR/on-node.out"
check "--node of a host no job ran on: none" test ! -s "$T_DIR/on-no-node.out"
check "every descriptor of rank 0, the accounting store's among them, is close-on-exec" test ! -s "$T_DIR/fds.out"
check_output "inactive-limit=2 purged all but 2 jobs" '^2$' sh -c "wc -l <'$T_DIR/kept.ids'"

# Restarted after kill -9: every record is there once, the purged jobs' too.
cat >"$T_DIR/after.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
banyan history --no-header -o '{id}' | sort >after.ids
banyan bank list >banks.out
banyan bank show below >below.out
SCRIPT
banyan start --test-size=1 --statedir "$STATE" -S job-manager.inactive-limit=2 bash "$T_DIR/after.sh"
check_output "after kill -9 and a restart: all 7 records, each once" '^7 7$' \
    sh -c "echo \$(wc -l <'$T_DIR/after.ids') \$(sort -u '$T_DIR/after.ids' | wc -l)"
check_output "the banks made before kill -9 are there, shares and limits kept" \
    '^kept +3 +[0-9.]+ +0 max-cores=4$' cat "$T_DIR/banks.out"
check_output "... with the sub-bank below its parent" '^  below +1 ' cat "$T_DIR/banks.out"
check_output "... and its user, default and limits" "^$(id -un) +\* +1 +[0-9.]+ +1.000 max-running-jobs=2\$" \
    cat "$T_DIR/below.out"

# A record that never reached the store (its store lost here) is written
# from the eventlog when rank 0 starts: the 2 jobs still kept come back.
rm -f "$STATE"/accounting.db*
banyan start --test-size=1 --statedir "$STATE" -S job-manager.inactive-limit=2 bash "$T_DIR/after.sh"
check_output "an accounting store lost: the kept jobs' records are written again" "^$(sort "$T_DIR/kept.ids" | tr '\n' ' ')\$" \
    sh -c "tr '\n' ' ' <'$T_DIR/after.ids'"

# Bad input: one line each.
check_fails "an unknown result" "^banyan history: -s bogus: 'bogus' is not completed" \
    banyan start --test-size=1 banyan history -s bogus
check_fails "an unknown field" "^banyan history: -o: unknown field \{colour\}" \
    banyan start --test-size=1 banyan history -o '{colour}'
check_fails "a bad time" "^banyan history: -S yesterday-ish: " \
    banyan start --test-size=1 banyan history -S yesterday-ish
