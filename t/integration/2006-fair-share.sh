#!/bin/bash
# Banks, fair-share and limits (doc/spec/accounting.md §5-9) on a
# multi-user instance: jobs are charged to a bank the user may use; a user
# who has used the cluster waits behind one who has not, until their usage
# decays; bank limits hold jobs with the limit named and release them, or
# refuse them at submit. The jobs are simulated (exec.test.run_duration)
# on a fixed synthetic cluster of 8 cores, so nothing depends on this
# machine's size.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/multi_user.sh"
start_multi_user '[resource]
synthetic = "node[0-3]: core:2"
[priority]
decay-half-life = "2s"
recalc-interval = "0.5s"'
cd "$T_DIR/home"
sim() { echo "-S exec.test.run_duration=$1"; }

# No bank yet: jobs go as before, with none.
id=$(as "$ALICE" banyan submit $(sim 0) true)
check "without banks, a job runs as before" as "$ALICE" banyan job wait "$id"
check_fails "asking for a bank where there are none is refused" "bank 'physics': this instance has no banks" \
    as "$ALICE" banyan submit --bank physics true

# The owner makes the tree; users may not.
check_fails "a user may not add a bank" "only the instance owner" as "$BOB" banyan bank add mine
check "the owner adds banks" sh -c "banyan bank add science && banyan bank add physics --parent science &&
    banyan bank add chem --parent science && banyan bank user add $ALICE physics"
check_fails "bob, in no bank yet, may not submit" "uid [0-9]+ belongs to no bank" as "$BOB" banyan submit true
check "bob joins chem" banyan bank user add "$BOB" chem
check_fails "bob may not charge physics, and is told his banks" "bank 'physics': uid [0-9]+ may not use it \(theirs: chem\)" \
    as "$BOB" banyan submit --bank physics true
check_fails "an unknown bank is named" "bank 'nope': no such bank" as "$BOB" banyan submit --bank nope true
check_fails "a bank cycle is refused" "would make a cycle" banyan bank set science --parent chem
check_fails "a negative share is refused" "shares: -1 is not 0 to" banyan bank set chem --shares -1
check_fails "a bank with users cannot be removed" "bank 'chem' has users" banyan bank remove chem
check_output "anyone may look at the tree" '^  chem +1 ' as "$BOB" banyan bank list
check_output "a job goes to the user's default bank" '^physics$' \
    bash -c "as $ALICE banyan job info $(as "$ALICE" banyan submit $(sim 0) true) | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"job\"][\"bank\"])'"

# Fair-share: alice fills the queue with 200 one-core jobs of a second;
# once some have run, bob's 20 go before her remaining ones.
as "$ALICE" banyan submit $(sim 1s) --cc 1-200 true >"$T_DIR/alice.ids"
wait_for "some of alice's jobs have run" 30 \
    bash -c "[ \$(as $ALICE banyan history -S all --bank physics --no-header -o '{id}' | wc -l) -ge 8 ]"
as "$BOB" banyan submit $(sim 1s) --cc 1-20 true >"$T_DIR/bob.ids"
wait_for "all 20 of bob's jobs have started" 60 \
    bash -c "[ \$(as $BOB banyan jobs -a --no-header -o '{st}' | grep -cv '^S') -eq 20 ]"
pending=$(as "$ALICE" banyan jobs --no-header -o '{st}' | grep -c '^S')
check "bob's 20 started while alice still had $pending of 200 pending (over 100)" test "$pending" -gt 100
check_output "banyan job priority explains an alice job's place" "^ +f[^ ]+ +[0-9]+ physics +[0-9]+ +5161 " \
    as "$ALICE" banyan job priority "$(tail -1 "$T_DIR/alice.ids")"
as "$ALICE" banyan cancel --all >/dev/null
wait_for "bob's jobs are done" 60 bash -c "[ -z \"\$(as $BOB banyan jobs --no-header)\" ]"
# Usage decays by half every 2 s: below a core-second both are even.
wait_for "once the usage decays, alice and bob are even again" 60 python3 -c "
import json, subprocess, sys
t = json.loads(subprocess.check_output(['banyan', 'bank', 'list', '--json']))
f = sorted(u['fairshare'] for u in t['users'])
sys.exit(0 if f == [1.0, 1.0] else 1)"
check_output "history: bob's records are charged to chem" '^chem$' \
    bash -c "as $BOB banyan history -S all --bank chem --no-header -o '{bank}' | sort -u"
check_output "banyan usage: bob sees his own row, 20 jobs of 1 s in chem" "^$BOB +chem +20 +0\.0[01] " \
    as "$BOB" banyan usage -S all
check_fails "... not everyone's" "only the instance owner" as "$BOB" banyan usage -A
check_output "by bank, bob sees his bank's total only" '^BANK [^;]*;chem +20 [^;]*;$' \
    bash -c "as $BOB banyan usage --by bank -S all | tr '\n' ';'"
check_output "the owner sees science count its sub-banks' jobs" '^ok$' python3 -c "
import json, subprocess
rows = {r['bank']: r for r in json.loads(subprocess.check_output(['banyan', 'usage', '--by', 'bank', '-S', 'all', '--json']))}
s, p, c = rows['science'], rows['physics'], rows['chem']
print('ok' if s['jobs'] == p['jobs'] + c['jobs'] and abs(s['core_seconds'] - p['core_seconds'] - c['core_seconds']) < 1e-6 else rows)"

# A running limit holds jobs, named, and lets them go as room comes.
banyan bank user set "$BOB" chem --max-running-jobs 2
for i in 1 2 3 4; do as "$BOB" banyan submit $(sim 3s) true; done >"$T_DIR/limited.ids"
wait_for "two run, two wait under the limit, named" 20 bash -c \
    "as $BOB banyan jobs --no-header -o '{st} {info}' | sort | tr '\n' ';' | grep -Eq \"^R [^;]*;R [^;]*;S limit: uid [0-9]+ in bank 'chem' max-running-jobs 2;S limit: uid [0-9]+ in bank 'chem' max-running-jobs 2;\$\""
waiting=$(as "$BOB" banyan jobs --no-header -o '{id} {st}' | awk '$2 == "S" {print $1; exit}')
as "$BOB" banyan job urgency "$waiting" 10
check_output "a new urgency keeps the job in its bank, waiting under the limit" \
    "^$waiting chem limit: uid [0-9]+ in bank 'chem' max-running-jobs 2\$" \
    bash -c "as $BOB banyan jobs --no-header -o '{id} {bank} {info}' | grep '^$waiting '"
check "raising the limit releases them at once" banyan bank user set "$BOB" chem --max-running-jobs 0
wait_for "all four run" 10 bash -c "[ \$(as $BOB banyan jobs --no-header -o '{st}' | grep -c '^R') -eq 4 ]"
banyan bank set chem --max-running-jobs 1
as "$BOB" banyan submit $(sim 0) true >/dev/null
wait_for "a bank's limit holds too" 10 bash -c "as $BOB banyan jobs --no-header -o '{info}' | grep -q \"limit: bank 'chem' max-running-jobs 1\""
wait_for "and lets go once the bank's jobs end" 30 bash -c "[ -z \"\$(as $BOB banyan jobs --no-header)\" ]"

# Submit limits refuse, naming the limit.
banyan bank set chem --max-running-jobs 0 --max-cores 2
check_fails "a job that alone is over a bank's max-cores is refused" "bank 'chem' max-cores 2 \(the job alone is over it\)" \
    as "$BOB" banyan submit -n4 true
banyan bank user set "$BOB" chem --max-submit-jobs 1
as "$BOB" banyan submit --urgency=0 true >/dev/null
check_fails "one job over max-submit-jobs is refused" "uid [0-9]+ in bank 'chem': max-submit-jobs 1 reached" \
    as "$BOB" banyan submit true
as "$BOB" banyan cancel --all >/dev/null
check "the user's last bank gone, the bank may go" sh -c "banyan bank user remove $BOB chem && banyan bank remove chem"
check_fails "bob, in no bank again, may not submit" "belongs to no bank" as "$BOB" banyan submit true
