#!/bin/bash
# banyan job update (jobs.md §7): a pending job's time limit, name and
# urgency change; the scheduler plans with the new limit (the job's R
# ends there); a running job's limit moves its end, raised or lowered, and
# the scheduler's estimates with it; the change is an event, kept across
# a restart of rank 0; what cannot change is refused in one line and
# nothing is stored.
# (Queues: 1005; a user raising a limit: 0012.)
. "$(dirname "$0")/lib.sh"

state=$T_DIR/state
mkdir -p "$state"
cd "$T_DIR"
# R's length: its expiration less its start ("none" without one).
cat >r-length.py <<'PY'
import json, sys
R = json.load(sys.stdin)["R"]["execution"]
print(round(R["expiration"] - R["starttime"]) if R.get("expiration") else "none")
PY

cat >first.sh <<'SCRIPT'
set -u
blocker=$(banyan submit -N1 --exclusive -t 1h -S exec.test.run_duration=3600 true)
waiting=$(banyan submit -N1 --exclusive -t 10m --job-name=before true)
held=$(banyan submit --urgency=0 -t 1h --job-name=kept true)
echo "$waiting" >waiting.id
echo "$held" >held.id
banyan job wait-event "$blocker" start >/dev/null
banyan jobs --start --no-header -o '{id} {t_estimate}' >estimate.before
banyan job update "$waiting" time-limit=5 name=after urgency=20 >update.out 2>&1; echo $? >update.rc
banyan job update "$held" name=renamed time-limit=30m >/dev/null
unlimited=$(banyan submit --urgency=0 -t 1h true)
banyan job update "$unlimited" time-limit=none urgency=16
echo "$unlimited" >unlimited.id
banyan jobs --no-header -o '{id} {name} {urgency} {st}' >listing
banyan job update "$blocker" queue=batch >running.out 2>&1
banyan job update "$blocker" time-limit=10m
banyan jobs --start --no-header -o '{id} {t_estimate}' >estimate.after
banyan jobs --no-header -o '{id} {t_run}' | awk -v id="$blocker" '$1 == id {print $2}' >blocker.t_run
banyan job update "$waiting" colour=red >field.out 2>&1
banyan job update "$waiting" time-limit=soon >limit.out 2>&1
banyan job update "$waiting" queue=batch >queue.out 2>&1
banyan job update "$waiting" name= >empty.out 2>&1
banyan cancel "$blocker"
banyan job wait "$waiting"
banyan job info "$waiting" | python3 r-length.py >waiting.R
banyan job eventlog "$waiting" >waiting.eventlog
# Running jobs: one given more time, one less.
longer=$(banyan submit -t 2s -S exec.test.run_duration=4 true)
banyan job wait-event "$longer" start >/dev/null
banyan job update "$longer" time-limit=1m
shorter=$(banyan submit -t 1h -S exec.test.run_duration=3600 true)
banyan job wait-event "$shorter" start >/dev/null
banyan job update "$shorter" time-limit=1s
banyan job wait "$unlimited"
banyan job wait "$longer"
banyan job wait "$shorter"  # (times out: its status is not this script's)
banyan jobs -a --no-header -o '{id} {result}' >results
banyan job info "$(cat unlimited.id)" | python3 r-length.py >unlimited.R
echo "$longer $shorter" >running.ids
SCRIPT
check "an instance where a pending job is updated" banyan start --test-size=1 --statedir "$state" bash first.sh
waiting=$(cat waiting.id)
held=$(cat held.id)
check_output "the update answers, quietly" "^0 $" sh -c 'echo "$(cat update.rc) $(cat update.out)"'
check_output "name and urgency changed" "^ *$waiting after 20 S$" grep "^ *$waiting" listing
check_output "the job ran with the new time limit (a bare 5: minutes): its R is 5 minutes" "^300$" cat waiting.R
check_output "the update is in its eventlog" " update duration=300.0 name=after userid=$(id -u)$" \
    grep " update " waiting.eventlog
check_output "a running job's queue cannot change, in one line" \
    "^banyan job update: f[1-9A-Za-z]+: job is run; only its time limit and name can change now$" cat running.out
# The waiting job's estimate: the blocker's start plus its limit, 1 h,
# then 10 min once lowered (whole seconds; t_run has fractions).
near() { awk -v got="$1" -v t="$2" -v after="$3" 'BEGIN {d = got - (t + after); exit !(got != "" && d > -1.5 && d < 1.5)}'; }
t_run=$(cat blocker.t_run)
estimate() { awk -v id="$waiting" '$1 == id {print $2}' "$1"; }
check "the waiting job was expected an hour after the blocker started" near "$(estimate estimate.before)" "$t_run" 3600
check "... and 10 minutes after, once the blocker's limit was lowered" near "$(estimate estimate.after)" "$t_run" 600
read -r longer shorter <running.ids
check_output "a running job given more time completes" "^ *$longer completed$" grep "^ *$longer" results
check_output "one given less times out" "^ *$shorter timeout$" grep "^ *$shorter" results
unlimited=$(cat unlimited.id)
check_output "a job whose limit the owner removed (and released, in one update) runs" "^ *$unlimited completed$" \
    grep "^ *$unlimited" results
check_output "... with no end in its R" "^none$" cat unlimited.R
check_output "an unknown field" "^banyan job update: colour: cannot be updated \(time-limit, name, queue, urgency, throttle\)$" \
    cat field.out
check_output "a bad time limit" "^banyan job update: time-limit=soon: expected a duration like 30m, 2h or 1d, or none$" \
    cat limit.out
check_output "a queue where there are none" "^banyan job update: queue 'batch': this instance has no queues$" \
    cat queue.out
check_output "an empty value" "^banyan job update: name=: expected FIELD=VALUE" cat empty.out
check_output "nothing stored for the refusals: one update event" "^1$" grep -c " update " waiting.eventlog

cat >second.sh <<SCRIPT
set -u
banyan jobs --no-header -o '{id} {name} {st}' >after-restart
banyan job release "$held"
banyan job wait "$held"
banyan job info "$held" | python3 r-length.py >held.R
SCRIPT
check "rank 0 started again on the same state" banyan start --test-size=1 --statedir "$state" bash second.sh
check_output "the held job's new name is kept" "^ *$held renamed S$" grep "^ *$held" after-restart
check_output "... and its new time limit: its R is 30 minutes" "^1800$" cat held.R
