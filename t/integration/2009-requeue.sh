#!/bin/bash
# banyan job requeue (jobs.md §3, §7): a running job's tasks end and it is
# pending again with its id, its output and eventlog continued; a finished
# job runs again; a requeued job is never purged while active, and stays
# pending across a restart of rank 0; what cannot be requeued is refused
# in one line. (--requeue after a node failure: fault/4006.)
. "$(dirname "$0")/lib.sh"
state=$T_DIR/state
mkdir -p "$state"
cd "$T_DIR"

cat >first.sh <<'SCRIPT'
set -u
# A running job: requeued while its tasks wait for a file.
run=$(banyan submit --requires=rank:1 sh -c 'echo "run $BANYAN_JOB_ID"; touch started.$$; while [ ! -e go ]; do sleep 0.05; done; echo done')
echo "$run" >run.id
banyan job wait-event "$run" start >/dev/null
until ls started.* >/dev/null 2>&1; do sleep 0.05; done
banyan job requeue "$run" >requeue.out 2>&1; echo $? >requeue.rc
banyan job wait-event "$run" requeue >/dev/null
touch go
banyan job wait "$run"; echo $? >run.rc
banyan job attach "$run" >run.out
banyan job eventlog "$run" | awk '{print $2}' | tr '\n' ' ' >run.events
# Refusals.
held=$(banyan submit --urgency=0 true)
banyan job requeue "$held" >pending.out 2>&1; echo $? >pending.rc
banyan cancel "$held"
banyan job requeue f11111111119 >unknown.out 2>&1; echo $? >unknown.rc
# A finished job, requeued while a whole-node job holds its node: pending,
# and not purged (inactive-age 1 s) while other jobs end and are purged.
blocker=$(banyan submit --requires=rank:1 -x -S exec.test.run_duration=3600 true)
banyan job wait-event "$blocker" start >/dev/null
banyan job requeue "$run" --note "once more" >/dev/null
banyan job wait-event "$run" priority >/dev/null
first=""
for _ in $(seq 200); do
    other=$(banyan submit --requires=rank:0 true)
    banyan job wait "$other" >/dev/null
    first=${first:-$other}
    banyan job info "$first" >/dev/null 2>&1 || break
    sleep 0.1
done
banyan job info "$first" >first.after 2>&1; echo $? >first.rc
banyan jobs -a --no-header -o '{id} {st}' >listing
rm go  # the requeued job, pending, waits for it again after the restart
SCRIPT
check "an instance where jobs are requeued" \
    banyan start --test-size=2 --statedir "$state" -S job-manager.inactive-age=1 bash first.sh
cp last.out first.log
run=$(cat run.id)
check_output "requeue of a running job succeeds" '^0$' cat requeue.rc
check_output "... and the job then runs to its end with the same id" '^0$' cat run.rc
check_output "its output continues after the requeue: both runs, then the end" \
    "^run $run
run $run
done$" sh -c 'cat run.out'
check_output "its eventlog goes on: requeue, the first run's end, then a second run" \
    '^submit depend priority alloc start requeue finish free clean priority alloc start finish free clean $' cat run.events
check_output "a pending job is refused, in one line" \
    "^banyan job requeue: f[1-9A-HJ-NP-Za-km-z]+: job is pending \(sched\): there is no run to requeue$" cat pending.out
check_output "... exit 1" '^1$' cat pending.rc
check_output "an unknown job is refused" "^banyan job requeue: f[1-9A-HJ-NP-Za-km-z]+: no such job$" cat unknown.out
check_output "older jobs were purged meanwhile (inactive-age 1 s)" "no such job" cat first.after
check "... and every usage record was stored, the requeued job's too" lacks "usage records? not stored" cat first.log
check "a requeued job starts in a cgroup of its own again" lacks "no cgroup" cat first.log
check_output "... the requeued one was not: it waits, pending" "^$run S$" grep "^$run " listing

cat >second.sh <<'SCRIPT'
set -u
run=$(cat run.id)
banyan jobs -a --no-header -o '{id} {st}' >listing.restarted
touch go
banyan job wait "$run"; echo $? >second.rc
banyan job eventlog "$run" | awk '$2 == "requeue" || $2 == "start" {print $2, $3, $4}' >run.starts
# wait --all answers each job once: one that ends, is requeued and ends
# again does not stand in for another still running.
quick=$(banyan submit --requires=rank:0 sh -c 'while [ ! -e quickgo ]; do sleep 0.05; done')
slow=$(banyan submit --requires=rank:0 sh -c 'while [ ! -e slowgo ]; do sleep 0.05; done')
banyan job wait-event "$quick" start >/dev/null
banyan job wait-event "$slow" start >/dev/null
banyan job wait --all --progress 2>waitall.err &
waiter=$!
# (Each wait bounded: 10 s, by 0.05 s steps.)
for _ in $(seq 200); do tr '\r' '\n' <waitall.err | grep -q '0/2' && break; sleep 0.05; done  # its list is taken
touch quickgo
banyan job wait "$quick" >/dev/null
banyan job requeue "$quick" >/dev/null
for _ in $(seq 200); do [ "$(banyan job eventlog "$quick" | grep -c ' clean')" -ge 2 ] && break; sleep 0.05; done
# Had it counted the second end, it would end now: given 2 s to.
state=waiting
for _ in $(seq 40); do kill -0 "$waiter" 2>/dev/null || { state=ended; break; }; sleep 0.05; done
echo "$state" >waitall.state
touch slowgo
wait "$waiter"; echo $? >waitall.rc
SCRIPT
check "after a restart of rank 0" banyan start --test-size=2 --statedir "$state" bash second.sh
check_output "the requeued job is pending again, with its id" "^$run (S|R)$" grep "^$run " listing.restarted
check_output "... and runs a third time" '^0$' cat second.rc
check_output "... the note kept in its eventlog" '^requeue note=once more' cat run.starts
check_output "three starts in all" '^3$' sh -c 'grep -c "^start" run.starts'
check_output "wait --all still waited after a job of its list ended twice (requeued)" '^waiting$' cat waitall.state
check_output "... and ended once the other job did, exit 0" '^0$' cat waitall.rc
check_output "... having answered each of its two jobs once" '2/2 100%' sh -c "tr '\r' '\n' <waitall.err | sed 's/\x1b\[K//g' | tail -1"
