#!/bin/bash
# Jobs through every state, each dependency type, urgency and hold, cancel
# of pending and running jobs, time limits, signals from `banyan run`, and
# what `banyan jobs` shows meanwhile: all through the CLI of a real
# 2-broker instance.
. "$(dirname "$0")/lib.sh"
need_cores 2 "jobs of 3 cores and a drained node among 2-core nodes"

cat >"$T_DIR/states.sh" <<'SCRIPT'
set -u
cd "$T_DIR"
st() { banyan jobs -a --no-header -o '{id} {st}' | awk -v id="$1" '$1 == id {print $2}'; }
export -f st
events() { banyan job eventlog "$1" | awk '{print $2}' | tr '\n' ' '; }
export -f events

# A job that runs to completion: every state in order in its eventlog.
id=$(banyan submit true)
check "job wait: a completed job exits 0" banyan job wait "$id"
check_output "eventlog: submit depend priority alloc start finish free clean" \
    '^submit depend priority alloc start finish free clean $' events "$id"
check_output "jobs -a: completed (CD), on this node" "^$id +CD +$(hostname)\$" \
    banyan jobs -a --no-header -o '{id} {st} {nodelist}'
check_output "job info: summary, jobspec and R" '"R_lite"' banyan job info "$id"
# The jobspec is kept as submitted; one written over several lines (a
# client's pretty-printed JSON) runs the same.
for form in pretty compact; do
    python3 - "$form" >"$T_DIR/$form.json" <<'PY'
import json, sys
spec = {"version": 1, "tasks": [{"command": ["echo", "from a " + sys.argv[1] + " jobspec"], "slot": "task",
                                 "count": {"per_slot": 1}}],
        "resources": [{"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 1}]}],
        "attributes": {"system": {"cwd": "/tmp", "duration": 0}}}
print(json.dumps({"jobspec": spec}, indent=2 if sys.argv[1] == "pretty" else None))
PY
    sid=$(banyan-test-client rpc job-manager.submit "@$T_DIR/$form.json" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
    check "a $form jobspec (as the client wrote it) runs" banyan job wait "$sid"
    check_output "... and its output is kept" "^from a $form jobspec\$" banyan job attach "$sid"
done
check_output "a decimal id names the same job" 'clean' banyan job eventlog "$(banyan jobs -a --no-header -n 1 -o '{id.dec}')"

# RUN, then CLEANUP through cancel: SIGTERM ends it, result canceled.
run_id=$(banyan submit sleep 300)
wait_for "a sleeping job is R" 10 bash -c "[ \"\$(st $run_id)\" = R ]"
check_output "jobs: INFO of a running job is its nodelist" "^$run_id R .+" \
    banyan jobs --no-header -o '{id} {st} {info}'
check "cancel a running job" banyan cancel "$run_id"
check_fails "job wait: a canceled job fails" 'cancel' banyan job wait "$run_id"
check_output "canceled running job: exception, finish 143, clean" \
    'exception.*finish status=143.*clean' sh -c "banyan job eventlog $run_id | tr '\n' ' '"
check_output "jobs: canceled is CA" "^$run_id CA" banyan jobs -a --no-header -o '{id} {st}'

# Hold (urgency 0): SCHED with priority 0; released, it runs.
held=$(banyan submit --urgency=0 true)
check_output "a held job gets priority 0 (job wait-event)" "priority priority=0" \
    banyan job wait-event -t 10s "$held" priority
check_fails "job wait-event gives up at its timeout, in one line" "^banyan job wait-event: $held: no start event within 0.5$" \
    banyan job wait-event -t 0.5 "$held" start
check_output "a held job stays S and says why" "^$held S held" banyan jobs --no-header -o '{id} {st} {info}'
check "job urgency ID 16 releases it" banyan job urgency "$held" 16
check "the released job completes" banyan job wait "$held"
check_fails "job wait-event: a job that ended without the event, in one line" \
    "^banyan job wait-event: $held: the job ended with no exception event$" banyan job wait-event "$held" exception
check_output "... and one that has it answers at once" " finish status=0 usage=\{\"cpu\":[0-9.e-]+,\"maxrss\":[0-9]+,\"totalrss\":[0-9]+\}$" banyan job wait-event "$held" finish
# Urgency 16 with the default weights and no bank: 1 + 10000 * 16/31.
check_output "eventlog of a held job: priority 0, urgency, priority 5162" \
    'priority=0.*urgency=16.*priority=5162' sh -c "banyan job eventlog $held | tr '\n' ' '"
check_fails "urgency of an inactive job is refused" 'only while it is pending' banyan job urgency "$held" 10
check_fails "urgency 32 is refused" 'expected 0 to 31' banyan job urgency "$held" 32
# Cancel a pending (held) job: it never runs.
held2=$(banyan submit --urgency=hold true 2>/dev/null || banyan submit --urgency=0 true)
check "cancel a pending job" banyan cancel "$held2"
check_fails "the canceled pending job is canceled" 'cancel' banyan job wait "$held2"
check_output "a pending job canceled never started" '^submit depend priority exception clean $' events "$held2"
check_fails "cancel of an inactive job says so" 'inactive' banyan cancel "$held2"

# Expedite: an urgency-31 job goes before older ones.
blocker=$(banyan submit -n 4 sleep 300)
wait_for "a job holding every core runs" 10 bash -c "[ \"\$(st $blocker)\" = R ]"
first=$(banyan submit -n 4 true)
second=$(banyan submit --urgency=31 -n 4 true)
check_output "jobs: the expedited job lists first among pending" "^$second\$" \
    sh -c "banyan jobs --no-header -f pending -o '{id}' | head -1"
banyan cancel "$blocker"
check "the expedited job completes" banyan job wait "$second"
check "and then the older one" banyan job wait "$first"
t_second=$(banyan jobs -a --no-header -o '{id} {t_run}' | awk -v id="$second" '$1==id {print $2}')
t_first=$(banyan jobs -a --no-header -o '{id} {t_run}' | awk -v id="$first" '$1==id {print $2}')
check "the expedited job started first" awk -v a="$t_second" -v b="$t_first" 'BEGIN {exit !(a <= b)}'

# Dependencies: each type, met and never met.
ok_job=$(banyan submit true)
bad_job=$(banyan submit false)
banyan job wait "$ok_job"; banyan job wait "$bad_job"
check "afterok on a completed job runs" banyan job wait "$(banyan submit --dependency=afterok:$ok_job true)"
check_fails "afterok on a failed job never runs" 'can never be met' \
    banyan job wait "$(banyan submit --dependency=afterok:$bad_job true)"
check "afternotok on a failed job runs" banyan job wait "$(banyan submit --dependency=afternotok:$bad_job true)"
check_fails "afternotok on a completed job never runs" 'can never be met' \
    banyan job wait "$(banyan submit --dependency=afternotok:$ok_job true)"
check "afterany on a failed job runs" banyan job wait "$(banyan submit --dependency=afterany:$bad_job true)"
long=$(banyan submit sleep 300)
after_start=$(banyan submit --dependency=afterstart:$long true)
check "afterstart runs once its target starts" banyan job wait "$after_start"
after_any=$(banyan submit --dependency=afterany:$long true)
wait_for "afterany on a running job waits in DEPEND (D)" 5 bash -c "[ \"\$(st $after_any)\" = D ]"
check_output "jobs: a waiting job says what it depends on" "^$after_any D depends on afterany:$long" \
    banyan jobs --no-header -o '{id} {st} {info}'
banyan cancel "$long"
check "afterany runs once its target ends" banyan job wait "$after_any"
held3=$(banyan submit --urgency=0 true)
never=$(banyan submit --dependency=afterstart:$held3 true)
banyan cancel "$held3"
check_fails "afterstart on a job canceled before it started never runs" 'without starting' banyan job wait "$never"
check_fails "a dependency on an unknown job is refused at submit" 'no such job' \
    banyan submit --dependency=afterok:f2 true
check_fails "a malformed dependency is refused" 'expected afterok' banyan submit --dependency=before:f2 true
check "afterok on two jobs, as --help writes it (afterok:A,B)" \
    banyan job wait "$(banyan submit --dependency=afterok:$ok_job,$ok_job true)"
check "and as Slurm writes it (afterok:A:B)" banyan job wait "$(banyan submit --dependency=afterok:$ok_job:$ok_job true)"
check_fails "a decimal id is echoed as the user wrote it" '^banyan submit: dependency afterok:38: no such job$' \
    banyan submit --dependency=afterok:38 true

# hold and release: what Slurm and Flux users type first.
later=$(banyan submit --begin-time=+1h true)
check "job hold" banyan job hold "$later"
check_output "a held job has urgency 0" "^$later 0$" banyan jobs --no-header -o '{id} {urgency}'
check "job release" banyan job release "$later"
check_output "a released one 16" "^$later 16$" banyan jobs --no-header -o '{id} {urgency}'
banyan cancel "$later"

# Time limit: the job ends with a timeout.
to=$(banyan submit -t 1s sleep 60)
check_fails "a job past its time limit fails" 'timeout' banyan job wait "$to"
check_output "jobs: TO" "^$to TO" banyan jobs -a --no-header -o '{id} {st}'
check_output "jobs -f with -n: at most N jobs" "^1$" sh -c "banyan jobs -a -f completed -n1 --no-header | wc -l"
check_output "jobs -u USER: that user's jobs" "^$to " banyan jobs -a -u "$(id -un)" --no-header -o '{id} {st}'
check_fails "jobs -u of no such user: one line" "^banyan jobs: -u no-such-user-here: no such user$" \
    banyan jobs -u no-such-user-here
check_fails "an unknown -o field lists the known, {id.dec} among them" "unknown field \{bogus\} \(known: .*\{id.dec\}" \
    banyan jobs -o '{bogus}'

# banyan run: output, exit code, Ctrl-C once forwards SIGINT, twice cancels.
check_output "run: output of every task" '^hello 0 hello 1 $' \
    sh -c "banyan run -N2 sh -c 'echo hello \$BANYAN_TASK_RANK' | sort | tr '\n' ' '"
banyan run sh -c 'exit 7'
check "run: exits with the job's exit code" test $? = 7
check_output "run: stderr arrives too" 'oops' banyan run sh -c 'echo oops >&2'
banyan run --output=out.{{id}} sh -c 'echo into a file' >run.out 2>&1
check_output "run --output: stdout goes to the file" 'into a file' sh -c 'cat out.f*'
banyan run sh -c 'trap "echo got INT; exit 9" INT; echo trap-set; while :; do sleep 0.1; done' >int1.out 2>&1 &
pid=$!
wait_for "run: the trapping job has set its trap" 10 grep -q trap-set int1.out
kill -INT $pid
wait $pid
check "run: Ctrl-C once reaches the tasks (the job's own exit code)" test $? = 9
check_output "run: the job saw SIGINT" 'got INT' cat int1.out
banyan run sh -c 'trap "" INT; echo trap-set; while :; do sleep 0.1; done' >int2.out 2>&1 &
pid=$!
wait_for "run: the INT-ignoring job has set its trap" 10 grep -q trap-set int2.out
kill -INT $pid
wait_for "run: the first Ctrl-C is taken" 10 grep -q "sending SIGINT" int2.out
kill -INT $pid
wait $pid
check "run: Ctrl-C twice cancels (non-zero exit)" test $? != 0
check_output "run: says it canceled" 'canceling job' cat int2.out
check_output "jobs: the twice-interrupted job is CA" '^CA sh' \
    sh -c "banyan jobs -a --no-header -o '{st} {name}' | head -1"

# Simulated execution holds resources and spawns nothing.
sim=$(banyan submit -S exec.test.run_duration=0.5s /no/such/program)
wait_for "a simulated job runs" 5 bash -c "[ \"\$(st $sim)\" = R ]"
check "a simulated job of a missing program completes" banyan job wait "$sim"

# An unknown command is an exec exception, one line.
check_fails "run: a missing program fails with one line" 'exec: /no/such/program: No such file' \
    banyan run /no/such/program
SCRIPT
banyan start --test-size=2 bash "$T_DIR/states.sh"
