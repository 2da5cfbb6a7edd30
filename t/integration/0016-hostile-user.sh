#!/bin/bash
# A hostile local user against a multi-user instance (the one 0012 stands
# up, with HTTP on 127.0.0.1): what each attack of the security review did
# and no longer does (doc/spec/shell.md §1 and §3.1, jobs.md §2.1,
# http.md §1), and what held before and must keep holding. Bob is the
# hostile user here; the service user plays a broker account that leaked.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/multi_user.sh"

# The brokers' own environment carries what must never reach a job's
# shell: a marker, and library search paths that would load code.
mkdir -p "$T_DIR/plugins"
BROKER_ENV=(BNYT_FROM_BROKER=leaked "HWLOC_PLUGINS_PATH=$T_DIR/plugins" "GCONV_PATH=$T_DIR/plugins")
start_multi_user '[http]
listen = "127.0.0.1:0"'
URL=http://$(banyan uptime | sed -n 's,.*http http://,,p')
TOKEN=$(runuser -u "$SVC" -- env BANYAN_URI="$BANYAN_URI" "$P/bin/banyan" token create)
cd "$T_DIR/home"

# --- Descriptors, environment, dumpability: what a job's task can reach.
# Alice's task reports its own descriptors (those of `sh`, listed by a
# child), its shell's pid, and then waits, so its shell can be looked at.
as "$ALICE" banyan submit --output="$T_DIR/home/alice/probe.out" sh -c \
    'echo fds $(ls /proc/$$/fd); echo shell $PPID; echo owner $(stat -c %U /proc/$PPID/status);
     echo oom $(cat /proc/self/oom_score_adj); sleep 60; true' >"$T_DIR/probe.id"
wait_for "alice's probe job reports" 30 grep -q '^owner ' "$T_DIR/home/alice/probe.out"
sed 's/^/    | /' "$T_DIR/home/alice/probe.out"
check_output "her task holds 0, 1, 2 and the PMI-1 socket (3), nothing else" "^fds 0 1 2 3$" \
    cat "$T_DIR/home/alice/probe.out"
shell_pid=$(sed -n 's/^shell //p' "$T_DIR/home/alice/probe.out")
# Every descriptor of the shell above stderr is one it opened itself: no
# TCP socket (rank 0's HTTP listener was one), no file of the broker's.
tcp_inodes=$(awk 'NR > 1 { print $10 }' /proc/net/tcp /proc/net/tcp6 | sort -u)
shell_fds() {
    local fd target
    for fd in /proc/"$shell_pid"/fd/*; do
        [ "${fd##*/}" -gt 2 ] || continue
        target=$(readlink "$fd") || continue
        echo "${fd##*/} $target"
    done
}
shell_fds | sed 's/^/    | /'
leaked() {
    local fd target inode
    shell_fds | while read -r fd target; do
        case $target in
            socket:*)
                inode=${target#socket:[}
                inode=${inode%]}
                if echo "$tcp_inodes" | grep -qx "$inode"; then echo "fd $fd: a TCP socket"; fi
                ;;
            pipe:* | anon_inode:* | /dev/null) ;;
            "$T_DIR"/rank-*/jobs/*) ;;
            *) echo "fd $fd: $target" ;;
        esac
    done
}
check_output "the shell inherited nothing: no TCP socket, no broker file" "^$" leaked
check_fails "the shell's environment has nothing of the broker's" "." \
    sh -c "tr '\\0' '\\n' </proc/$shell_pid/environ | grep -E '^(BNYT_FROM_BROKER|HWLOC_PLUGINS_PATH|GCONV_PATH)='"
check_output "and is made from nothing: HOME, USER, LOGNAME, SHELL, PATH" \
    "^HOME=.*LOGNAME=.*PATH=/usr/local/bin:/usr/bin:/bin SHELL=.* USER=$ALICE $" \
    sh -c "tr '\\0' '\\n' </proc/$shell_pid/environ | sort | tr '\\n' ' '"
check_output "the shell is not dumpable: its /proc files are root's, so her task cannot ptrace it" "^owner root$" \
    grep '^owner ' "$T_DIR/home/alice/probe.out"
broker_oom=$(cat /proc/"$(broker_pid "$T_DIR" 0)"/oom_score_adj)
task_oom=$(sed -n 's/^oom //p' "$T_DIR/home/alice/probe.out")
check "her task's oom_score_adj ($task_oom) is above the broker's ($broker_oom)" test "$task_oom" -gt "$broker_oom"
as "$ALICE" banyan cancel "$(cat "$T_DIR/probe.id")"
check_output "without PMI a task holds 0, 1 and 2 only" "^fds 0 1 2$" \
    as "$ALICE" banyan run -o pmi=off sh -c 'echo fds $(ls /proc/$$/fd); true'

# --- Lines without end: cut at 1 MiB, the job told once.
as "$BOB" banyan run -l sh -c 'head -c 3000000 /dev/zero | tr "\0" x; echo; echo after' >"$T_DIR/long.out" 2>&1
check_output "a labelled line over 1 MiB is cut, and the job told once" \
    "^0: banyan-shell: a line over 1048576 bytes was cut$" cat "$T_DIR/long.out"
check_output "... once" "^1$" grep -c "was cut" "$T_DIR/long.out"
check_output "no byte of it is lost" "^3000000$" sh -c "grep -v 'was cut' '$T_DIR/long.out' | grep -o x | wc -l"
check_output "what follows it comes whole" "^0: after$" cat "$T_DIR/long.out"

# --- The helper: a credential is spent once per job and node of its R.
cat >"$T_DIR/one-slot.json" <<'JSON'
{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0}}}
JSON
chmod 644 "$T_DIR/one-slot.json"
signed() { as "$ALICE" sh -c "munge <'$T_DIR/one-slot.json'"; }
R_of() {
    local host=${2:-$(hostname)} n hosts=""
    for n in $(seq "$(echo "$1" | tr ',' ' ' | wc -w)"); do hosts+="${hosts:+,}\"$host\""; done
    printf '{"version":1,"execution":{"R_lite":[{"rank":"%s","children":{"core":"0"}}],"nodelist":[%s]}}' "$1" "$hosts"
}
req() { printf '{"id":%s,"rank":%s,"userid":%s,"J":"%s","tmpdir":"%s","R":%s}' "$1" "$2" "$3" "$4" "$5" "$6"; }
mkdir -p "$T_DIR/impjobs" && chown "$SVC" "$T_DIR/impjobs" && chmod 0755 "$T_DIR/impjobs"
imp() { runuser -u "$SVC" -- "$IMP" exec 3<<<"$1" </dev/null; }
uid_a=$(id -u "$ALICE")
J=$(signed)
check_fails "a rank outside the job's R is refused" "rank 1 is not in the job's R \(0\)" \
    imp "$(req 30 1 "$uid_a" "$J" "$T_DIR/impjobs/30" "$(R_of 0)")"
check_fails "an R that puts the rank on another host is refused" "puts rank 0 on elsewhere, not on this node" \
    imp "$(req 30 0 "$uid_a" "$J" "$T_DIR/impjobs/30" "$(R_of 0 elsewhere)")"
check_fails "a request without R is refused" "request.R: missing" \
    imp "$(printf '{"id":30,"rank":0,"userid":%s,"J":"%s","tmpdir":"%s"}' "$uid_a" "$J" "$T_DIR/impjobs/30")"
check_fails "a tmpdir whose directory does not exist is refused" "tmpdir .*/no-such-dir: No such file" \
    imp "$(req 30 0 "$uid_a" "$J" "$T_DIR/no-such-dir/30" "$(R_of 0)")"
check "... before the credential is spent: it then starts rank 0's shell" \
    imp "$(req 30 0 "$uid_a" "$J" "$T_DIR/impjobs/30" "$(R_of 0,1)")"
check_fails "a new rank number does not replay it: one slot holds one node" \
    "a replayed credential: it started 1 shells of .*, as many as the nodes its jobspec can hold" \
    imp "$(req 30 1 "$uid_a" "$J" "$T_DIR/impjobs/30b" "$(R_of 0,1)")"
check_fails "nor does a new job id" "a replayed credential: it started job .*, not " \
    imp "$(req 31 0 "$uid_a" "$J" "$T_DIR/impjobs/31" "$(R_of 0)")"
cat >"$T_DIR/two-nodes.json" <<'JSON'
{"version":1,"resources":[{"type":"node","count":2,"with":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0}}}
JSON
chmod 644 "$T_DIR/two-nodes.json"
J2=$(as "$ALICE" sh -c "munge <'$T_DIR/two-nodes.json'")
check "a two-node job's credential starts rank 0's shell" \
    imp "$(req 32 0 "$uid_a" "$J2" "$T_DIR/impjobs/32" "$(R_of 0,1)")"
check "and rank 1's, on a host with two brokers" \
    imp "$(req 32 1 "$uid_a" "$J2" "$T_DIR/impjobs/32b" "$(R_of 0,1)")"
check_fails "but no third" "as many as the nodes its jobspec can hold" \
    imp "$(req 32 2 "$uid_a" "$J2" "$T_DIR/impjobs/32c" "$(R_of 0,1,2)")"

# --- The job the scheduler shows is the job that runs.
jobs_before=$(banyan jobs -A -a --no-header | wc -l)
cat >"$T_DIR/forged.json" <<JSON
{"jobspec":$(cat "$T_DIR/one-slot.json"),"J":"$(as "$ALICE" sh -c "echo '{\"version\":1,\"tasks\":[{\"command\":[\"id\"]}]}' | munge")"}
JSON
chmod 644 "$T_DIR/forged.json"
cp "$BANYAN_BUILD_DIR/bin/banyan-test-client" "$T_DIR/test-client"
check_fails "a J that signs another jobspec is refused at submit, in one line" \
    "^error 1: J: the signed jobspec is not the one submitted$" \
    as "$ALICE" "$T_DIR/test-client" rpc job-manager.submit "@$T_DIR/forged.json"
cat >"$T_DIR/stolen.json" <<JSON
{"jobspec":$(cat "$T_DIR/one-slot.json"),"J":"$(signed)"}
JSON
chmod 644 "$T_DIR/stolen.json"
check_fails "alice's J submitted by bob is refused" "J: signed by uid $uid_a, not by the submitting user" \
    as "$BOB" "$T_DIR/test-client" rpc job-manager.submit "@$T_DIR/stolen.json"
check_fails "a forged J is refused at submit" "J: the signature is refused by MUNGE" \
    as "$BOB" sh -c "sed 's/\"J\":\"MUNGE:[^\"]*\"/\"J\":\"MUNGE:AAAAforged:\"/' '$T_DIR/stolen.json' >'$T_DIR/bob-forged.json' &&
        '$T_DIR/test-client' rpc job-manager.submit '@$T_DIR/bob-forged.json'"
ALICE_TOKEN=$(banyan token create --user "$ALICE")
check_output "... over REST too, in the same line" '^403 .*J: the signed jobspec is not the one submitted' \
    sh -c "curl -s -o '$T_DIR/rest.out' -w '%{http_code} ' -H 'Authorization: Bearer $ALICE_TOKEN' \
        -H 'Content-Type: application/json' --data-binary @$T_DIR/forged.json $URL/api/v1/jobs; cat '$T_DIR/rest.out'"
check_output "nothing of those was stored" "^$jobs_before$" sh -c "banyan jobs -A -a --no-header | wc -l"

# --- Streams and connections: one user cannot end or block another's.
as "$ALICE" banyan events --follow --json >"$T_DIR/alice-events.out" 2>&1 &
alice_stream=$!
first=$(as "$ALICE" banyan submit true)
wait_for "alice's event stream is open" 20 grep -q "$first" "$T_DIR/alice-events.out"
for i in $(seq 40); do as "$BOB" banyan events --follow >"$T_DIR/bob-events.$i" 2>&1 & done
wait_for "bob's oldest streams are ended, naming the limit" 20 \
    sh -c "cat $T_DIR/bob-events.* | grep -q 'more than 32 streams of one user'"
check "alice's stream is still open" kill -0 "$alice_stream"
alice_job=$(as "$ALICE" banyan submit true)
wait_for "and still gets her events" 20 grep -q "$alice_job" "$T_DIR/alice-events.out"
kill "$alice_stream" 2>/dev/null
pkill -u "$BOB" -f "banyan events" 2>/dev/null

# 300 connections that never finish their request head, no token needed.
python3 - "$URL" >"$T_DIR/flood.log" 2>&1 <<'PY' &
import socket, sys, time
host, port = sys.argv[1][len("http://"):].rsplit(":", 1)
held = []
for i in range(300):
    try:
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n")
        held.append(s)
    except OSError as e:
        print("connect:", e)
print("holding", len(held), flush=True)
time.sleep(8)
PY
flood=$!
wait_for "300 half-sent requests are open" 10 grep -q '^holding' "$T_DIR/flood.log"
check_output "the owner's request is answered meanwhile" "^200$" \
    curl -s -m 5 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$URL/api/v1/jobs"
kill "$flood" 2>/dev/null
check_output "'Authorization: bearer' in lower case is taken (the scheme is case-insensitive)" "^200$" \
    curl -s -m 5 -o /dev/null -w '%{http_code}' -H "Authorization: bearer $TOKEN" "$URL/api/v1/jobs"
# A request head sent a byte a second: the 10 s deadline is not restarted
# by each byte.
check_output "a head that trickles in is cut at 10 s, not kept alive by each byte" "^closed after 1[0-2] s$" \
    python3 - "$URL" <<'PY'
import socket, sys, time
host, port = sys.argv[1][len("http://"):].rsplit(":", 1)
s = socket.create_connection((host, int(port)))
start = time.time()
try:
    for c in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
        s.sendall(bytes([c]))
        time.sleep(1)
        if time.time() - start > 20:
            break
    s.settimeout(1)
    s.recv(1)
except OSError:
    pass
print("closed after %d s" % int(time.time() - start))
PY

# --- What held before keeps holding.
job=$(as "$ALICE" banyan submit sleep 300)
check_fails "bob may not cancel alice's job" "not your job" as "$BOB" banyan cancel "$job"
check_fails "bob may not read her output" "not your job" as "$BOB" banyan job attach "$job"
BOB_TOKEN=$(banyan token create --user "$BOB")
check_output "nor over REST" '^(403|404)$' \
    curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $BOB_TOKEN" "$URL/api/v1/jobs/$job"
check_output "a token with alg none is refused" '^401$' \
    curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $(printf '{"alg":"none"}' | base64 -w0 | tr -d =).$(printf '{"sub":"0"}' | base64 -w0 | tr -d =)." \
    "$URL/api/v1/jobs"
check_fails "bob cannot read rank 0's run directory" "Permission denied" as "$BOB" ls "$T_DIR/rank-0/jobs"
check_fails "nor the job database" "Permission denied|No such file" \
    as "$BOB" sh -c "cat $T_DIR/rank-0/state/*.db >/dev/null"
check_fails "bob's output into alice's home is refused" "Permission denied" \
    as "$BOB" banyan run --output="$T_DIR/home/alice/from-bob" true
check_output "--env LD_PRELOAD reaches only bob's own task, as bob" "^$BOB$" \
    as "$BOB" banyan run --env=LD_PRELOAD=/nonexistent.so id -un
as "$ALICE" banyan cancel "$job"
