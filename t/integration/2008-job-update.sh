#!/bin/bash
# banyan job update (jobs.md §7): a pending job's time limit, name and
# urgency change; the scheduler plans with the new limit (the job's R
# ends there); the change is an event, kept across a restart of rank 0;
# what cannot change is refused in one line and nothing is stored.
# (Queues: 1005; a user raising a limit: 0012.)
. "$(dirname "$0")/lib.sh"

state=$T_DIR/state
mkdir -p "$state"
cd "$T_DIR"
# R's length: its expiration less its start.
cat >r-length.py <<'PY'
import json, sys
R = json.load(sys.stdin)["R"]["execution"]
print(round(R["expiration"] - R["starttime"]))
PY

cat >first.sh <<'SCRIPT'
set -u
blocker=$(banyan submit -N1 --exclusive -t 1h -S exec.test.run_duration=3600 true)
waiting=$(banyan submit -N1 --exclusive -t 10m --job-name=before true)
held=$(banyan submit --urgency=0 -t 1h --job-name=kept true)
echo "$waiting" >waiting.id
echo "$held" >held.id
banyan job wait-event "$blocker" start >/dev/null
banyan job update "$waiting" time-limit=5 name=after urgency=20 >update.out 2>&1; echo $? >update.rc
banyan job update "$held" name=renamed time-limit=30m >/dev/null
banyan jobs --no-header -o '{id} {name} {urgency} {st}' >listing
banyan job update "$blocker" name=x >running.out 2>&1
banyan job update "$waiting" colour=red >field.out 2>&1
banyan job update "$waiting" time-limit=soon >limit.out 2>&1
banyan job update "$waiting" queue=batch >queue.out 2>&1
banyan job update "$waiting" name= >empty.out 2>&1
banyan cancel "$blocker"
banyan job wait "$waiting"
banyan job info "$waiting" | python3 r-length.py >waiting.R
banyan job eventlog "$waiting" >waiting.eventlog
SCRIPT
check "an instance where a pending job is updated" banyan start --test-size=1 --statedir "$state" bash first.sh
waiting=$(cat waiting.id)
held=$(cat held.id)
check_output "the update answers, quietly" "^0 $" sh -c 'echo "$(cat update.rc) $(cat update.out)"'
check_output "name and urgency changed" "^ *$waiting after 20 S$" grep "^ *$waiting" listing
check_output "the job ran with the new time limit (a bare 5: minutes): its R is 5 minutes" "^300$" cat waiting.R
check_output "the update is in its eventlog" " update duration=300.0 name=after userid=$(id -u)$" \
    grep " update " waiting.eventlog
check_output "a running job is refused, in one line" \
    "^banyan job update: f[1-9A-Za-z]+: job is run; it can be updated only while it is pending$" cat running.out
check_output "an unknown field" "^banyan job update: colour: cannot be updated \(time-limit, name, queue, urgency\)$" \
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
