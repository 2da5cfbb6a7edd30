#!/bin/bash
# An 8-broker instance with fanout 2: the tree, routing to every rank,
# errors for missing services and ranks, events in order, roles, bad input,
# exit status, and a clean shutdown that leaves no process behind.
. "$(dirname "$0")/lib.sh"

# The built programs load their libraries from the system's directories and
# those their libraries name, never from the directory they run in (an
# empty run path entry): a job's working directory could supply them.
for program in banyan banyan-broker banyan-shell banyan-imp; do
    check "$program's run path has no empty entry" \
        lacks '(R(UN)?PATH).*(\[:|::|:\])' readelf -d "$BANYAN_BUILD_DIR/bin/$program"
done

inside() {
    dir=$(instance_dir)
    echo "$dir" >"$T_DIR/instance"
    if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ]; then
        check_output "the run directory is on tmpfs, in /dev/shm" '^/dev/shm/banyan-' echo "$dir"
    else
        check_output "the run directory is in /tmp (no writable tmpfs at /dev/shm)" '^/tmp/banyan-' echo "$dir"
    fi
    state_dir "$dir" >"$T_DIR/state"
    check_output "rank 0's database is on disk, in /tmp" '^/tmp/banyan-' cat "$T_DIR/state"
    check_output "overlay status shows 8 full brokers" "^online: 0-7 \(8\)$" banyan overlay status --summary
    check_output "overlay status draws the fanout-2 tree" "│  │  └─ 7: full" banyan overlay status
    for r in 0 1 2 3 4 5 6 7; do
        check_output "ping rank $r" "rank=$r seq=0" banyan ping "$r"
    done
    check_output "ping rank 7 goes 0-1-3-7" "route=client!0!1!3!7 " banyan ping 7
    check_fails "ping rank 8 fails with a clear error" "^banyan ping: rank 8: no rank 8: the instance has ranks 0-7$" \
        banyan ping 8
    check_fails "ping of a non-number names it" "^banyan ping: x: expected a rank number$" banyan ping x
    check_output "uptime shows run and size" " run .*size 8, 8 online" banyan uptime
    check_output "missing service: ENOSYS" "^error 38: no service 'nosuch'$" \
        banyan-test-client rpc nosuch.x '{}'
    check_output "missing method: ENOSYS" "^error 38: no method 'broker.nosuch' on rank 5$" \
        banyan-test-client rpc broker.nosuch '{}' 5
    check_output "upstream request from rank 3 is served by rank 1" '"rank":1' \
        banyan-test-client rpc broker.info '{}' 3 upstream
    check_output "a follower forwards broker.ready to rank 0" '"online":8' \
        env BANYAN_URI="local://$dir/rank-6/local.sock" banyan-test-client rpc broker.ready '{}'

    # Events: published from a leaf, received in order at rank 0 and at a leaf.
    banyan-test-client events test. 5 >"$T_DIR/ev0" &
    ev0=$!
    BANYAN_URI="local://$dir/rank-5/local.sock" banyan-test-client events test. 5 >"$T_DIR/ev5" &
    ev5=$!
    wait_for "subscribers are ready" 10 sh -c "grep -q subscribed $T_DIR/ev0 && grep -q subscribed $T_DIR/ev5"
    check "publish 5 events from rank 7" env BANYAN_URI="local://$dir/rank-7/local.sock" \
        banyan-test-client publish test.x 5
    wait "$ev0" "$ev5"
    check "rank 0 got 5 events with consecutive sequence numbers" \
        sh -c "grep -v subscribed $T_DIR/ev0 | awk '{print \$1}' | awk 'NR>1 && \$1!=p+1{exit 1}{p=\$1}END{exit NR!=5}'"
    check "rank 5 got the same 5 events" sh -c "diff $T_DIR/ev0 $T_DIR/ev5"

    # One request for many ranks (overlay.md §10.1): each rank answers
    # once, asked by its own broker (the request crossed each link once,
    # as a multicast, not routed to it), and the stream ends with ENODATA.
    banyan-test-client rpc broker.multicast '{"ranks":"0-7","topic":"broker.ping","payload":{}}' 0 streaming \
        >"$T_DIR/mc" || true
    check_output "a multicast to ranks 0-7 has one answer a rank" "^0 1 2 3 4 5 6 7 $" \
        sh -c "grep '^{' $T_DIR/mc | jq -r '.answers[].rank' | sort -n | tr '\n' ' '"
    check_output "then its end" "^error 61: " tail -1 "$T_DIR/mc"
    check_output "rank 7 was asked by its own broker" '^\["i[0-9a-f]+"\]$' \
        sh -c "grep '^{' $T_DIR/mc | jq -c '.answers[] | select(.rank == 7) | .payload.route'"
    BANYAN_URI="local://$dir/rank-1/local.sock" banyan-test-client rpc broker.multicast \
        '{"ranks":"1,3-4,6-7","topic":"broker.ping","payload":{}}' 1 streaming >"$T_DIR/mc1" || true
    check_output "a multicast from rank 1 reaches its subtree and, through its parent, the rest" "^1 3 4 6 7 $" \
        sh -c "grep '^{' $T_DIR/mc1 | jq -r '.answers[] | select(.payload) | .rank' | sort -n | tr '\n' ' '"
    check_output "rank 6 (not below rank 1) was asked by its own broker" '^\["i[0-9a-f]+"\]$' \
        sh -c "grep '^{' $T_DIR/mc1 | jq -c '.answers[] | select(.rank == 6) | .payload.route'"
    check_output "... and that stream ends too" "^error 61: " tail -1 "$T_DIR/mc1"
    # Large answers (8 of 400 KB) go up in messages of about 1 MiB, never
    # one too large for a broker to take.
    python3 -c 'import json; print(json.dumps({"ranks": "0-7", "topic": "broker.ping", "payload": {"x": "y" * 400000}}))' \
        >"$T_DIR/big.json"
    banyan-test-client rpc broker.multicast "@$T_DIR/big.json" 0 streaming >"$T_DIR/mcbig" || true
    check_output "a multicast's 8 answers of 400 KB each all come, in messages of at most 1.1 MB" "^8 yes$" \
        sh -c "grep '^{' $T_DIR/mcbig | jq '.answers | length' | jq -s add | tr '\n' ' ';
               awk '/^{/ && length(\$0) > 1100000 {big=1} END {print big ? \"no\" : \"yes\"}' $T_DIR/mcbig"
    check_output "a multicast to a rank the instance lacks is refused whole, walking no id" \
        "^error 113: broker.multicast: no rank 4294967294: the instance has ranks 0-7$" banyan-test-client rpc \
        broker.multicast '{"ranks":"0-4294967294","topic":"broker.ping","payload":{}}' 0 streaming
    check_output "a multicast's payload that is not an object is refused" "^error 71: broker.multicast: expected" \
        banyan-test-client rpc broker.multicast '{"ranks":"0","topic":"broker.ping","payload":[1]}' 0 streaming
    check_output "a multicast that is not a stream is refused" \
        "^error 71: broker.multicast: its answers come as a stream" \
        banyan-test-client rpc broker.multicast '{"ranks":"0-7","topic":"broker.ping","payload":{}}' 0
    check_output "a multicast without its payload is refused" "^error 71: broker.multicast: expected" \
        banyan-test-client rpc broker.multicast '{"ranks":"0-7","topic":"broker.ping"}' 0 streaming
    check_output "a multicast of a multicast is refused" "^error 71: broker.multicast: expected" \
        banyan-test-client rpc broker.multicast '{"ranks":"0","topic":"broker.multicast","payload":{}}' 0 streaming
    check_output "a multicast whose streaming is not a boolean is refused" \
        "^error 71: broker.multicast.streaming: expected" banyan-test-client rpc broker.multicast \
        '{"ranks":"0","topic":"broker.ping","payload":{},"streaming":1}' 0 streaming
    check_output "a multicast with ranks of the wrong type is refused" "^error 71: broker.multicast.ranks: expected" \
        banyan-test-client rpc broker.multicast '{"ranks":[1],"topic":"broker.ping","payload":{}}' 0 streaming

    # Bad input never hurts a broker.
    check_output "a malformed stream is dropped" "^dropped$" banyan-test-client garbage
    check_output "the broker still answers after bad input" "rank=0" banyan ping 0

    # A guest (another uid) may ping but not read the log.
    chmod 755 "$dir"
    if id nobody >/dev/null 2>&1; then
        check_output "a guest may ping" "rank=1" setpriv --reuid=nobody --regid=nogroup --clear-groups banyan ping 1
        check_fails "a guest may not read dmesg" "only the instance owner" \
            setpriv --reuid=nobody --regid=nogroup --clear-groups banyan dmesg
    fi
    check_output "the owner reads dmesg" "quorum reached: 8 of 8" banyan dmesg

    # The machine is discovered once, by banyan start, for all its brokers;
    # a broker loads no library it does not use at start-up (libpq until
    # PostgreSQL accounting connects, no libsystemd, no hwloc plugin for
    # OpenGL or libxml2): they were most of a broker's start-up.
    check_output "the brokers take the machine banyan start discovered" "^topology-cache = \"$dir/topology.xml\"$" \
        cat "$dir/instance.toml"
    check "which is there" test -s "$dir/topology.xml"
    check "a broker maps none of libpq, libsystemd, X11 or libxml2" \
        lacks "libpq|libsystemd|libX11|libxml2" cat "/proc/$(broker_pid "$dir" 1)/maps"

    # The brokers are forked by one loaded broker (overlay.md §12; a
    # sanitizer build executes each), yet each is as if executed: banyan
    # start's own child, in a process group of its own, showing its own
    # arguments, holding none of the forker's descriptors.
    if ! sanitized; then
        forker=$(ps -o pid=,args= --ppid "$PPID" | awk '$3 == "--fork-brokers" {print $1}')
        echo "$forker" >"$T_DIR/forker"
        check "one broker forks the others, a child of banyan start" test -n "$forker"
        socket=$(readlink "/proc/$forker/fd/3")
        check_output "it holds its socket from banyan start" '^socket:\[[0-9]+\]$' echo "$socket"
    fi
    for r in 0 5; do
        p=$(broker_pid "$dir" "$r")
        check "rank $r is found by its own arguments" test -n "$p"
        check_output "rank $r is banyan start's child, leading its own process group" "^ *$PPID +$p$" \
            ps -o ppid=,pgid= -p "$p"
        sanitized || check "rank $r holds no descriptor of the forker" \
            sh -c "! ls -l /proc/$p/fd | grep -qF -- '$socket'"
    done
    check_output "rank 5's command line is its own" "--config $dir/instance.toml --rank 5 --rundir $dir/rank-5 " \
        sh -c "tr '\\0' ' ' </proc/$(broker_pid "$dir" 5)/cmdline"
}
export -f inside

if banyan start --test-size=8 bash -c inside; then ok "8-broker instance ran"; else not_ok "8-broker instance ran"; fi
no_brokers_left "no broker is left after shutdown" "$(cat "$T_DIR/instance")"
sanitized || check "nor the forker" sh -c "! kill -0 $(cat "$T_DIR/forker") 2>/dev/null"
check_fails "the forker run by hand says what it is for" \
    "^banyan-broker: --fork-brokers is run by banyan start, not by hand$" \
    sh -c 'exec 3<&-; exec banyan-broker --fork-brokers x'
check_fails "and without its argument" "^banyan-broker: --fork-brokers is run by banyan start, not by hand$" \
    banyan-broker --fork-brokers
# Where clone3 is refused (a container runtime's older seccomp profile
# answers ENOSYS), each broker is executed instead, without a word, and
# the instance runs jobs as ever.
if [ "$(uname -m)" = x86_64 ]; then
    python3 "$BANYAN_SOURCE_DIR/t/integration/no_clone3.py" banyan start --test-size=3 \
        sh -c 'banyan run -N3 echo ran; ps -o stat=,args= --ppid $PPID' >"$T_DIR/noclone3.out" 2>"$T_DIR/noclone3.err"
    check_output "without clone3 an instance of 3 brokers runs a job on all three" "^3$" \
        sh -c "grep -c '^ran$' '$T_DIR/noclone3.out'"
    check_output "its 3 brokers were executed, and no forker is left" "^3 0$" \
        sh -c "echo \$(grep -c -- '--config' '$T_DIR/noclone3.out') \$(grep -c -- '--fork-brokers\\|defunct' '$T_DIR/noclone3.out')"
    check "and nothing is said of it" sh -c "! grep -q 'executed each' '$T_DIR/noclone3.err'"
fi
check "the run and state directories are removed at exit" \
    sh -c "[ ! -e '$(cat "$T_DIR/instance")' ] && [ ! -e '$(cat "$T_DIR/state")' ]"
check_output "start exits with the command's status" "^rc=3$" sh -c 'banyan start --test-size=2 sh -c "exit 3"; echo rc=$?'
check_output "start exits 128+N when the command is killed" "^rc=143$" \
    sh -c 'banyan start --test-size=1 sh -c "kill -TERM \$\$"; echo rc=$?'
if [ "$(nproc)" -ge 2 ]; then
    check_output "from that one discovery each broker takes the CPUs it may run on (taskset -c 0: one core each)" \
        '"free":\{"ncores":2,' taskset -c 0 banyan start --test-size=2 banyan resource list --json
fi
check_fails "start without a size or config says so" "give exactly one of --test-size=N and --config=FILE" \
    banyan start
check_fails "commands outside an instance say so" "BANYAN_URI is not set" env -u BANYAN_URI banyan ping 0
check_fails "an unknown command is named" "^banyan: 'nosuch' is not a banyan command \(see banyan --help\)$" banyan nosuch
check_fails "a missing argument is one line naming the command" "^banyan ping: RANK is required \(see --help\)$" \
    banyan ping
check_fails "a bad option value is one line" "^banyan ping: --count: Value x not in range 1 to 1000000" \
    banyan ping -c x 1

# `banyan shutdown` from inside the command (as from another terminal):
# said once, not as a broker that "exited early", and the command, whose
# BANYAN_URI is now dead, is ended as a closed terminal would end it.
start=$SECONDS
banyan start --test-size=2 sh -c 'banyan shutdown; sleep 30; echo survived' >"$T_DIR/outside.out" 2>&1
check_output "an outside shutdown is said once" \
    "^banyan start: the instance was shut down \(banyan shutdown\); ending the command$" cat "$T_DIR/outside.out"
check "no broker is said to have exited early" sh -c "! grep -q 'exited early' '$T_DIR/outside.out'"
check "the command is ended, not left running with a dead BANYAN_URI" \
    sh -c "! grep -q survived '$T_DIR/outside.out' && [ $((SECONDS - start)) -lt 20 ]"
check_output "COMMAND keeps the descriptors it was given, as under a shell (<(...), a jobserver's)" "^inherited$" \
    banyan start --test-size=1 sh -c 'cat <&5' 5<<<"inherited"
