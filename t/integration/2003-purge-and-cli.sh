#!/bin/bash
# Inactive jobs are purged by count and by age (memory and disk stay flat),
# and the job commands' bad input gets one clear line naming it.
. "$(dirname "$0")/lib.sh"

cat >"$T_DIR/limit.sh" <<'SCRIPT'
set -u
banyan submit --cc=1-20 true >/dev/null
banyan job wait --all
# A job is purged once its usage record is stored (within 100 ms).
wait_for "inactive-limit=5: only the 5 newest inactive jobs are kept" 10 \
    sh -c "[ \$(banyan jobs -a --no-header | wc -l) -eq 5 ]"
SCRIPT
banyan start --test-size=1 -S job-manager.inactive-limit=5 bash "$T_DIR/limit.sh"

# job wait --all takes its list at rank 0 in one request: jobs that end and
# are purged while it waits (a list, then a wait each, found them gone:
# "no such job") are still answered, with their results.
cat >"$T_DIR/wait-all.sh" <<'SCRIPT'
set -u
# bar FILE: the progress bar's states and the lines above it, one a line.
bar() { tr '\r' '\n' <"$1" | sed 's/\x1b\[K//g'; }
export -f bar
# Jobs that wait 3 s for their begin time, so that the wait has its list
# before any ends; then all 1,500 end and are purged while it waits.
banyan submit --cc=1-1500 --begin-time=+3s -S exec.test.run_duration=0 true >/dev/null
check_output "1,500 jobs under inactive-limit=5: wait --all answers every one, exits 0" '^1500/1500 100% rc=0$' \
    bash -c 'banyan job wait --all --progress 2>purge.err; rc=$?; echo "$(bar purge.err | tail -1 | grep -o "[0-9]*/[0-9]* [0-9]*%") rc=$rc"'
check_output "none of them 'no such job'" '^0$' bash -c 'bar purge.err | grep -c "no such job"'
banyan submit --urgency=0 --cc=1-2 false >failed.ids
banyan job wait --all --progress 2>failed.err &
w=$!
wait_for "the wait has the two held jobs" 20 bash -c 'bar failed.err | grep -q " 0/2 "'
for id in $(cat failed.ids); do banyan job urgency "$id" default; done
wait "$w"
check_output "two failed jobs: exit 1" '^1$' echo "$?"
check_output "each failed job's id and result on stderr" '^2$' \
    bash -c 'bar failed.err | grep -cE "^banyan job wait: f[1-9A-HJ-NP-Za-km-z]+: failed$"'
banyan submit --urgency=0 --cc=1-3 true >held.ids
BANYAN_URI="local://$(instance_dir)/rank-1/local.sock" banyan job wait --all --progress 2>rank1.err &
w=$!
wait_for "a wait from rank 1 has the three held jobs" 20 bash -c 'bar rank1.err | grep -q " 0/3 "'
for id in $(cat held.ids); do banyan job urgency "$id" default; done
wait "$w"
rc=$?
check_output "from rank 1 (answers relayed from rank 0): 3/3, exit 0" '^3/3 100% rc=0$' \
    bash -c "echo \"\$(bar rank1.err | tail -1 | grep -o '[0-9]*/[0-9]* [0-9]*%') rc=$rc\""
check_output "nothing active: exits 0 at once" '^rc=0$' sh -c 'timeout 10 banyan job wait --all 2>&1; echo rc=$?'
check_output "a request that is not streaming: one line" 'a streaming request is expected' \
    sh -c 'banyan-test-client rpc job-manager.wait-all "{}" 2>&1'
banyan submit --urgency=0 --cc=1-2 true >held.ids
# 16 waits of the two held jobs; each draws its bar (0/2) once it has its list.
pids=()
for i in $(seq 16); do
    banyan job wait --all --progress 2>"wait.$i.err" &
    pids+=($!)
done
wait_for "16 waits have their lists" 20 sh -c 'test $(grep -l " 0/2 " wait.*.err | wc -l) = 16'
banyan job wait --all --progress 2>wait.17.err &
pids+=($!)
wait_for "a 17th ends the oldest, with one line" 20 sh -c \
    'grep -l "^banyan job wait: job-manager.wait-all: ended: uid [0-9]* opened more than 16 at once (the oldest ends first)$" wait.*.err'
check_output "just one of the first 16" '^1$' sh -c 'grep -l "opened more than 16" wait.*.err | wc -l'
banyan cancel $(cat held.ids) >/dev/null
wait_for "the other 16 waits end once their jobs do" 20 \
    bash -c 'for p; do kill -0 $p 2>/dev/null && exit 1; done; exit 0' _ "${pids[@]}"
check_output "each reported the two canceled jobs" '^32$' sh -c 'cat wait.*.err | tr "\r" "\n" | grep -c ": canceled"'
SCRIPT
(cd "$T_DIR" && banyan start --test-size=2 -S job-manager.inactive-limit=5 bash "$T_DIR/wait-all.sh")

if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    need_munged # a guest's submit is signed
    cat >"$T_DIR/flood.sh" <<'SCRIPT'
set -u
banyan submit --cc=1-3 true >/dev/null
banyan job wait --all
chmod 755 "$(instance_dir)"
guest() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
guest banyan submit --cc=1-20 true >/dev/null
guest banyan job wait --all
wait_for "5 inactive jobs in all, once the records are stored" 10 \
    sh -c "[ \$(banyan jobs -a -A --no-header | wc -l) -eq 5 ]"
# Without purging the user with the most first, the owner's 3 would all be gone.
check "a guest's flood past inactive-limit=5 purges the guest's history first: the owner keeps 2 or more" \
    sh -c "test \$(banyan jobs -a --no-header | wc -l) -ge 2"
SCRIPT
    banyan start --test-size=1 -S job-manager.inactive-limit=5 bash "$T_DIR/flood.sh"
fi

cat >"$T_DIR/age.sh" <<'SCRIPT'
set -u
old=$(banyan submit true)
banyan job wait "$old"
sleep 1.5
new=$(banyan submit true)
banyan job wait "$new"
# Purged once its usage record is stored (within 200 ms of its end,
# accounting.md §3) and it is older than inactive-age: waited for.
wait_for "inactive-age=1: a job inactive for longer is purged" 5 \
    sh -c "[ \"\$(banyan jobs -a --no-header -o '{id}')\" = '$new' ]"
check_fails "a purged job is gone" 'no such job' banyan job eventlog "$old"
SCRIPT
banyan start --test-size=1 -S job-manager.inactive-age=1 bash "$T_DIR/age.sh"
check_fails "a bad inactive-limit is refused" 'inactive-limit' \
    banyan start --test-size=1 -S job-manager.inactive-limit=-1 true

# sched-window=2: only the 2 best pending jobs are asked of the scheduler;
# an expedited job displaces the worst of them and still starts first.
# Every job takes the whole node, so they start one after another and
# their start times differ by a whole job (a coarse clock cannot tie them).
cat >"$T_DIR/window.sh" <<'SCRIPT'
set -u
blocker=$(banyan submit -N1 -x sleep 300)
wait_for "the blocker runs" 10 sh -c "banyan jobs --no-header -o '{st}' | grep -q R"
banyan submit -N1 -x --cc=1-5 true >others.ids
fast=$(banyan submit -N1 -x --urgency=31 true)
check_output "all six wait (S)" '^6$' sh -c "banyan jobs --no-header -f sched | wc -l"
banyan cancel "$blocker"
banyan job wait "$blocker" >/dev/null 2>&1  # canceled: not one of the jobs below
check "with a window of 2, every job still completes" banyan job wait --all
banyan jobs -a --no-header -f completed -o '{t_run} {id}' | sort -n >started
check_output "the expedited job started first" "^[0-9.]+ $fast\$" head -1 started
SCRIPT
(cd "$T_DIR" && banyan start --test-size=1 -S job-manager.sched-window=2 bash "$T_DIR/window.sh")

cat >"$T_DIR/cli.sh" <<'SCRIPT'
set -u
check_fails "submit -N 0" '^banyan submit: -N 0: node count must be at least 1$' banyan submit -N 0 true
check_fails "submit -n 0" 'task count must be at least 1' banyan submit -n 0 true
check_fails "submit -n 1 -N 2" 'fewer tasks than nodes' banyan submit -n 1 -N 2 true
check_fails "submit -t 5x" '^banyan submit: -t 5x: not a duration' banyan submit -t 5x true
check_fails "submit with no command" 'no COMMAND' banyan submit -n 1
check_fails "submit --urgency 40" 'expected 0 \(hold\) to 31' banyan submit --urgency 40 true
check_fails "submit -S without =" 'expected KEY=VALUE' banyan submit -S foo true
check_fails "submit --cc bad" '^banyan submit: --cc ' banyan submit --cc=3-1 true
check_fails "submit: more nodes than there are" 'unsatisfiable|alloc' \
    sh -c 'banyan job wait $(banyan submit -N 64 true)'
for t in 30 10s 5m 2h 1d 1:30 01:00:00; do
    check_output "submit -t $t is accepted" '^f' banyan submit --urgency=0 -t "$t" true
done
check_output "-t 90s is 90 seconds in the jobspec" '"duration": 90' \
    sh -c 'banyan job info $(banyan submit --urgency=0 -t 90s true)'
check_output "-t 2 is two minutes" '"duration": 120' sh -c 'banyan job info $(banyan submit --urgency=0 -t 2 true)'
check_output "-S user.x=1 and -o exit-timeout=none set attributes" '"exit-timeout": "none"' \
    sh -c 'banyan job info $(banyan submit --urgency=0 -S user.x=1 -o exit-timeout=none true)'
check_fails "cancel with no id" 'give job IDs or --all' banyan cancel
check_fails "cancel a malformed id" 'fxyz0: not a job id' banyan cancel fxyz0
check_fails "cancel an unknown id" 'no such job' banyan cancel 12345
check "cancel --all cancels the held jobs" banyan cancel --all
check_output "no active jobs are left" '^0$' sh -c 'banyan jobs --no-header | wc -l'
check_fails "jobs --filter=bogus" 'filter=bogus: expected' banyan jobs --filter=bogus
check_fails "jobs -o {bogus}" 'unknown field \{bogus\}' banyan jobs -o '{bogus}'
check_output "jobs --json is a JSON array" '^\[' banyan jobs -a --json
check_output "jobs --filter=canceled lists canceled jobs" '^CA' sh -c "banyan jobs -a --no-header -f canceled -o '{st}' | sort -u"
check_fails "job urgency with a bad value" 'expected 0 to 31, hold' banyan job urgency f2 lots
check_fails "job wait with nothing" 'give a job ID or --all' banyan job wait
check_fails "job info of an unknown job" 'no such job' banyan job info f2
check_output "jobs lists 10,000 jobs quickly" '^10000$' sh -c \
    'banyan submit --cc=1-10000 --urgency=0 true >/dev/null; banyan jobs --no-header | wc -l'
start=$(date +%s%N)
banyan jobs >/dev/null
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "# banyan jobs with 10,000 jobs: ${ms} ms"
check "banyan jobs with 10,000 jobs takes under a second here (${ms} ms)" test "$ms" -lt 1000
SCRIPT
banyan start --test-size=1 bash "$T_DIR/cli.sh"
