#!/bin/bash
# Jobs run as the users who submitted them: a 4-broker instance runs as an
# unprivileged service user; banyan-imp (setuid root, group of that user)
# starts each job's shell as its submitter once MUNGE vouches for them.
# Users see and act on their own jobs only; per-user limits hold; the
# helper refuses forged, replayed and foreign requests.
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/multi_user.sh"
start_multi_user "[job-manager]
max-pending-per-user = 3"

# Each job runs as its submitter, on every node.
cd "$T_DIR/home"
out=$(cd / && as "$ALICE" sh -c "umask 027; banyan run -N4 -n4 sh -c 'echo \$(id -un) \$(id -Gn | tr \" \" ,) \$HOME \$USER \$(umask)'" 2>&1)
echo "$out" | sed 's/^/    | /'
check "alice's 4 tasks ran as alice on 4 brokers" test "$(echo "$out" | grep -c "^$ALICE ")" = 4
check "with her supplementary group" sh -c "echo '$out' | grep '^$ALICE ' | head -1 | grep -q $PROJ"
check "with HOME and USER from the password database" sh -c "echo '$out' | grep '^$ALICE ' | head -1 | grep -q ' $T_DIR/home/alice $ALICE '"
check "with the umask she submitted with" sh -c "echo '$out' | grep '^$ALICE ' | head -1 | grep -q ' 0027\$'"
check_output "bob's job runs as bob" "^$BOB\$" as "$BOB" banyan run id -un
check_output "the prolog ran as root on each of alice's 4 nodes, with her job's id and name" "^4$" \
    sh -c "grep -c '^0 f[^ ]* $ALICE [0-3]\$' '$T_DIR/prolog.out'"
check_output "so did the epilog" "^4$" sh -c "grep -c '^0 f[^ ]* $ALICE\$' '$T_DIR/epilog.out'"
as "$ALICE" banyan run --cwd "$T_DIR/home/alice" --output=out.txt sh -c 'echo hi; touch made-by-task' >/dev/null
check_output "her --output file is hers" "^$ALICE$" stat -c %U "$T_DIR/home/alice/out.txt"
check_output "and so is what her task made" "^$ALICE$" stat -c %U "$T_DIR/home/alice/made-by-task"

# eBPF profiles (doc/spec/profiling.md §2): the brokers run as the service
# user, so banyan-imp starts the profiler as root, only where imp.toml says
# so; users never load or read a program.
if [ -x "$P/libexec/banyan/banyan-profiler" ] && [ -r /sys/kernel/btf/vmlinux ]; then
    check_fails "imp.toml without profiling: a profiled job fails before any task, in one line" \
        "eBPF profiling on rank [0-9]: banyan-imp: eBPF profiling is off on this node \(imp.toml: profiling = true" \
        as "$ALICE" banyan run --profile-ebpf=cpu touch "$T_DIR/home/alice/profiled-ran"
    check "... and nothing of it ran" test ! -e "$T_DIR/home/alice/profiled-ran"
    sed -i 's/^profiling = false$/profiling = true/' "$P/etc/banyan/imp.toml"
    pid=$(cd / && as "$ALICE" banyan submit -N2 -n2 --profile-ebpf=cpu,file sh -c 'id -un; cat /etc/hostname >/dev/null')
    as "$ALICE" banyan job wait "$pid" >/dev/null
    check_output "with profiling = true, alice's profiled job runs as alice" "^$ALICE$" \
        bash -c "as $ALICE banyan job attach $pid | sort -u"
    as "$ALICE" banyan job profile --json "$pid" >"$T_DIR/alice-profile.json"
    check "... and she reads its profile" test -s "$T_DIR/alice-profile.json"
    check "... both tasks' CPU in it, and the file they read" \
        jq -e '([.ranks[].ranks[] | select(.cpu.oncpu > 0)] | length == 2) and
               ([.ranks[].files[].path] | index("/etc/hostname") != null)' "$T_DIR/alice-profile.json"
    check_fails "bob may not read it" "not your job|only the instance owner" as "$BOB" banyan job profile "$pid"
    check_output "the profilers run as root, children of the service user's brokers" "^root $SVC$" \
        sh -c "ps -o user= -o ppid= -C banyan-profiler | while read -r u pp; do echo \"\$u \$(ps -o user= -p \$pp)\"; done | sort -u"
    check_fails "a user cannot start banyan-imp profiler" "Permission denied" as "$ALICE" "$IMP" profiler
fi

# Who may do what.
job=$(as "$ALICE" banyan submit sleep 300)
check_fails "bob may not cancel alice's job" "not your job|only the instance owner" as "$BOB" banyan cancel "$job"
check_fails "bob may not kill it" "not your job|only the instance owner" as "$BOB" banyan job kill "$job"
check_fails "bob may not attach to it" "not your job|only the instance owner" as "$BOB" banyan job attach "$job"
check_fails "bob may not raise its urgency" "not your job|only the instance owner" as "$BOB" banyan job urgency "$job" 20
check_fails "alice may not go above urgency 16" "only the instance owner" as "$ALICE" banyan job urgency "$job" 20
check "bob does not see it" lacks "$job" as "$BOB" banyan jobs --no-header
check_fails "bob may not list everyone's" "only the instance owner" as "$BOB" banyan jobs -A
check_fails "bob may not drain" "only the instance owner" as "$BOB" banyan resource drain 1
check_fails "bob may not shut down" "only the instance owner" as "$BOB" banyan shutdown
check_output "the service user (the owner) sees alice's job" "$job" as "$SVC" banyan jobs -A
check "alice cancels her own" as "$ALICE" banyan cancel "$job"
pending=$(as "$ALICE" banyan submit --urgency=0 -t 10m true)
check_fails "bob may not update alice's pending job" "not your job" as "$BOB" banyan job update "$pending" name=mine
check "alice lowers its time limit" as "$ALICE" banyan job update "$pending" time-limit=5m
check_fails "... but may not raise it again" \
    "^banyan job update: time limit: only the instance owner may raise it \(now 5m00s\)$" \
    as "$ALICE" banyan job update "$pending" time-limit=10m
check "the owner may" as "$SVC" banyan job update "$pending" time-limit=10m
check "alice cancels it" as "$ALICE" banyan cancel "$pending"

# Per-user limits: three pending at most, the fourth refused with why.
for i in 1 2 3; do as "$BOB" banyan submit --urgency=0 true >/dev/null; done
check_fails "bob's 4th pending job is refused, naming the limit" "max-pending-per-user" \
    as "$BOB" banyan submit --urgency=0 true
check "bob cancels all his own jobs" as "$BOB" banyan cancel --all

# Accounting: each user reads only their own records (the owner, anyone's).
wait_for "alice's canceled job has its usage record" 20 \
    bash -c "as $ALICE banyan history --no-header -o '{id}' | grep -qx '$job'"
wait_for "so do bob's jobs" 20 bash -c "as $BOB banyan history --no-header -o '{id}' | grep -q ."
check_output "bob's history holds bob's jobs only" "^$BOB\$" bash -o pipefail -c "as $BOB banyan history --no-header -o '{user}' | sort -u"
check_fails "bob may not read alice's records" "only the instance owner" as "$BOB" banyan history -u "$ALICE"
check_fails "nor everyone's" "only the instance owner" as "$BOB" banyan history -A
check_output "the owner reads anyone's" "$job" as "$SVC" banyan history -A -o '{id}'

# Unsigned (a raw client, not banyan submit): refused at submit.
echo '{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],
 "tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0}}}' \
    >"$T_DIR/unsigned.json"
chmod 644 "$T_DIR/unsigned.json"
cp "$BANYAN_BUILD_DIR/bin/banyan-test-client" "$T_DIR/test-client"
check_fails "an unsigned job of a user is refused at submit" "signed with MUNGE" \
    as "$BOB" "$T_DIR/test-client" submit "$T_DIR/unsigned.json"

# munged out of reach (its socket hidden in a mount namespace of this
# command only): submit fails in one line, nothing is submitted.
check_fails "no munged: submit says so in one line" \
    "^banyan submit: cannot sign the job with MUNGE \(.*\): is munged running\?$" \
    unshare --mount sh -c "mount -t tmpfs none /run/munge && runuser -u $ALICE -- env BANYAN_URI=$BANYAN_URI $P/bin/banyan submit true"

# The helper itself: forged, replayed, and foreign callers.
J=$(as "$ALICE" sh -c "munge <'$T_DIR/unsigned.json'")
# (a MUNGE credential is base64 between colons: nothing to escape in JSON)
uid_a=$(id -u "$ALICE") uid_b=$(id -u "$BOB")
check_fails "a credential of alice for bob's job is refused" "made by uid $uid_a, not by its owner uid $uid_b" \
    imp "$(req 7 0 "$uid_b" "$J" "$T_DIR/impjobs/7")"
check_fails "a forged credential is refused by MUNGE" "refused by MUNGE" \
    imp "$(req 8 0 "$uid_a" "MUNGE:AAAAforged:" "$T_DIR/impjobs/8")"
check_fails "an unsigned job is refused" "not signed" imp "$(req 9 0 "$uid_a" "" "$T_DIR/impjobs/9")"
check_fails "a root job is refused" "jobs of root do not run here" imp "$(req 10 0 0 "$J" "$T_DIR/impjobs/10")"
imp "$(req 11 0 "$uid_a" "$J" "$T_DIR/impjobs/11")" >/dev/null 2>&1
check_fails "the same credential again (a replay) is refused" "a replayed credential" \
    imp "$(req 12 0 "$uid_a" "$J" "$T_DIR/impjobs/12")"
check_fails "a caller outside the group cannot run it" "Permission denied" \
    runuser -u "$BOB" -- "$IMP" exec
check_fails "a caller in the group but not allowed-users is refused" "may not use banyan-imp" \
    setpriv --reuid="$uid_b" --regid="$(getent group "$SVC" | cut -d: -f3)" --clear-groups "$IMP" exec

# A failing prolog fails the job with a `prolog` exception and drains the
# node with the reason; the drain is obeyed.
touch "$T_DIR/fail-prolog"
check_fails "bob's job fails with a prolog exception" "prolog: prolog on rank [0-3] exited with status 3" \
    as "$BOB" banyan run true
check_output "its node is drained with the reason" "drained.*prolog on rank [0-3] exited with status 3" \
    banyan resource status
rm "$T_DIR/fail-prolog"
