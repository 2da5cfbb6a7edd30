#!/bin/bash
# What a hostile local user can send or leave lying around never harms the
# instance: JSON nested 100,000 deep (a request, an event, a jobspec) gets
# one clear refusal; flux-core's invalid v1 jobspecs are refused and the
# valid ones accepted; the database and state directory are the owner's
# alone; a run or state directory that another user owns or may write is
# refused in one line.
. "$(dirname "$0")/lib.sh"

conformance=${BANYAN_SOURCE_DIR:-$(dirname "$0")/../..}/../shared/conformance/jobspec
deep() { # deep N: a JSON object whose value is nested N deep
    printf '{"a":'
    head -c "$1" /dev/zero | tr '\0' '['
    head -c "$1" /dev/zero | tr '\0' ']'
    printf '}'
}
deep 100000 >"$T_DIR/deep.json"
{
    printf '{"jobspec":{"version":1,"resources":'
    head -c 100000 /dev/zero | tr '\0' '['
    head -c 100000 /dev/zero | tr '\0' ']'
    printf '}}'
} >"$T_DIR/deep-jobspec.json"
export conformance

inside() {
    dir=$(instance_dir)
    for topic in broker.ping event.publish job-manager.submit; do
        check_output "$topic nested 100,000 deep is refused in one line" \
            "^error 71: malformed message: payload: JSON nested deeper than 64 levels$" \
            banyan-test-client rpc "$topic" "@$T_DIR/deep.json"
    done
    check_output "so is a jobspec nested 100,000 deep" "JSON nested deeper than 64 levels" \
        banyan-test-client rpc job-manager.submit "@$T_DIR/deep-jobspec.json"
    check_output "rank 0 lives on" "rank=0" banyan ping 0

    # exec.run passes its jobspec on to the shell unparsed: what it cannot
    # pass on is refused in one line all the same.
    {
        printf '{"id":5,"R":{},"jobspec":{"a":'
        head -c 100000 /dev/zero | tr '\0' '['
        head -c 100000 /dev/zero | tr '\0' ']'
        printf '}}'
    } >"$T_DIR/deep-run.json"
    check_output "exec.run: a jobspec nested 100,000 deep is refused" \
        "^error 71: exec.run: JSON nested deeper than 64 levels$" banyan-test-client rpc exec.run "@$T_DIR/deep-run.json"
    printf '{"id":5,"R":{},"jobspec":{\n"tasks":[]}}' >"$T_DIR/two-lines.json"
    check_output "exec.run: a jobspec on two lines is refused" "^error 71: exec.run: the jobspec is not on one line$" \
        banyan-test-client rpc exec.run "@$T_DIR/two-lines.json"
    for bad in -1 1e300 '"1e300s"'; do
        check_fails "a simulated run of $bad seconds fails in one line" \
            "exec.test.run_duration: expected seconds \(0 to 1e9\) or a duration like 10s$" \
            banyan run -S "exec.test.run_duration=$bad" true
    done
    check_output "rank 0 lives on after them" "rank=0" banyan ping 0

    # A jobspec as deep as one may be (48 levels: the jobspec, attributes,
    # system and 45 arrays) runs on a real shell; one level deeper is
    # refused at submit, not at its launch, where exec.run nests it deeper.
    nested() { head -c "$1" /dev/zero | tr '\0' '['; head -c "$1" /dev/zero | tr '\0' ']'; }
    check_output "a jobspec nested 48 deep runs" "^ran$" \
        banyan run --requires rank:0-1 --setattr "x=$(nested 45)" echo ran
    check_fails "one nested 49 deep is refused at submit in one line" \
        "^banyan submit: jobspec: nested deeper than 48 levels$" banyan submit --setattr "x=$(nested 46)" true
    # The stored text is what is sent at launch: a key given twice (the
    # parse keeps the last) hides no deeper first one.
    {
        printf '{"jobspec":{"attributes":%s,"version":1,' "$(nested 48)"
        printf '"resources":[{"type":"slot","label":"task","count":1,"with":[{"type":"core","count":1}]}],'
        printf '"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],'
        printf '"attributes":{"system":{"duration":0}}}}'
    } >"$T_DIR/twice.json"
    check_output "so is one whose deeper copy of a key given twice is the first" \
        "^error 22: jobspec: nested deeper than 48 levels$" banyan-test-client rpc job-manager.submit "@$T_DIR/twice.json"

    for f in "$conformance"/invalid_v1/*.yaml; do
        check_output "invalid v1 jobspec $(basename "$f") is refused" "^error 22: jobspec: " \
            banyan-test-client submit "$f"
    done
    # (Every node drained: they wait, none starts on the simulated nodes.)
    banyan resource drain 0-7 holding the valid jobspecs >/dev/null
    for f in "$conformance"/valid_v1/*.yaml; do
        check_output "valid v1 jobspec $(basename "$f") is accepted" '^\{"id":[0-9]+\}$' \
            banyan-test-client submit "$f"
    done
    banyan cancel --all >/dev/null 2>&1
    banyan resource undrain 0-7 >/dev/null

    state=$(state_dir "$dir")
    check_output "the state directory is the owner's alone (0700)" "^700 $(id -u)$" stat -c '%a %u' "$state"
    check_output "jobs.db is 0600" "^600$" stat -c '%a' "$state/jobs.db"
    check_output "banyan.db (drain reasons) is 0600" "^600$" stat -c '%a' "$state/banyan.db"
    check_output "the database's WAL is 0600 too" "^600$" stat -c '%a' "$state/jobs.db-wal"
}
export -f inside deep

# A graph that can hold every valid jobspec (4 nodes of 4 cores and 4 GPUs;
# ranks 2-7 simulated): each is accepted, not refused at submit as one
# that can never run here.
if banyan start --test-size=2 -S 'resource.synthetic="node[0-7]: socket:1,core:4,gpu:4"' bash -c inside; then
    ok "instance ran"
else not_ok "instance ran"; fi

# Directories the broker must not trust.
mkdir -m 0777 "$T_DIR/open"
check_fails "a run directory others may write is refused in one line" \
    "^banyan-broker: rundir $T_DIR/open: writable by other users$" \
    banyan-broker --rundir "$T_DIR/open" 2>&1
mkdir -m 0700 "$T_DIR/run" "$T_DIR/statedir"
chmod 0777 "$T_DIR/statedir"
check_fails "so is such a state directory" "^banyan-broker: statedir $T_DIR/statedir: writable by other users$" \
    banyan-broker --rundir "$T_DIR/run" --statedir "$T_DIR/statedir" 2>&1
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    # What a guest can do in /tmp before the broker first starts.
    mkdir -m 0755 "$T_DIR/theirs"
    chown nobody "$T_DIR/theirs"
    check_fails "a run directory another user made first is refused" \
        "^banyan-broker: rundir $T_DIR/theirs: owned by uid $(id -u nobody), not by this user \(uid 0\)$" \
        banyan-broker --rundir "$T_DIR/theirs" 2>&1
    check_fails "so is anything below it" "^banyan-broker: rundir $T_DIR/theirs: owned by uid $(id -u nobody)" \
        banyan-broker --rundir "$T_DIR/theirs/rank-0" 2>&1
    mkdir -m 0700 "$T_DIR/swapped"
    ln -s /etc/passwd "$T_DIR/swapped/jobs.db"
    check_fails "a database swapped for a link is refused" "jobs.db: a symbolic link" \
        timeout 20 banyan start --test-size=1 --statedir "$T_DIR/swapped" true
fi

# The default run directory: $XDG_RUNTIME_DIR/banyan/rank-0, made 0700.
mkdir -m 0700 "$T_DIR/xdg"
XDG_RUNTIME_DIR="$T_DIR/xdg" banyan-broker --log-level error >/dev/null 2>&1 &
broker=$!
wait_for "without --rundir the socket is in \$XDG_RUNTIME_DIR/banyan/rank-0" 10 test -S "$T_DIR/xdg/banyan/rank-0/local.sock"
check_output "made 0700" "^700$" stat -c '%a' "$T_DIR/xdg/banyan/rank-0"
kill -TERM "$broker" 2>/dev/null
wait "$broker" 2>/dev/null
