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
# A broker's pid (not that of the runuser that started it).
svc_broker_pid() { pgrep -u "$SVC" -f -- "--rank $1 --rundir $T_DIR/rank-$1( |\$)" | head -1; }

# --- Descriptors, environment, dumpability: what a job's task can reach.
# Alice's task reports its pid, its shell's, whether it could ptrace it and
# its OOM score, then becomes `sleep`: its descriptors are read from outside.
probe() {
    as "$ALICE" banyan submit "$@" --output="$T_DIR/home/alice/probe.out" sh -c \
        'echo shell $PPID; echo owner $(stat -c %U /proc/$PPID/status); echo oom $(cat /proc/self/oom_score_adj);
         echo task $$; exec sleep 60'
}
fds_of() { ls /proc/"$1"/fd | sort -n | paste -sd' '; }
probe >"$T_DIR/probe.id"
wait_for "alice's probe job reports" 30 grep -q '^task ' "$T_DIR/home/alice/probe.out"
sed 's/^/    | /' "$T_DIR/home/alice/probe.out"
task_pid=$(sed -n 's/^task //p' "$T_DIR/home/alice/probe.out")
shell_pid=$(sed -n 's/^shell //p' "$T_DIR/home/alice/probe.out")
check_output "her task holds 0, 1, 2 and the PMI-1 socket (3), nothing else" "^0 1 2 3$" fds_of "$task_pid"
check_output "fd 3 is the PMI-1 socket" "^socket:" readlink /proc/"$task_pid"/fd/3
# Every descriptor of the shell above stderr is one it opened itself:
# none is one of a broker's (rank 0's HTTP listener was), other than the
# pipes between them (anonymous inodes have no identity to compare).
broker_targets() {
    local r
    for r in 0 1 2 3; do
        find /proc/"$(svc_broker_pid "$r")"/fd -mindepth 1 -exec readlink {} \; 2>/dev/null
    done | grep -Ev '^(pipe|anon_inode):' | sort -u
}
shell_fds() {
    local fd
    for fd in /proc/"$shell_pid"/fd/*; do
        [ "${fd##*/}" -gt 2 ] && echo "${fd##*/} $(readlink "$fd")"
    done
}
shell_fds | sed 's/^/    | /'
leaked() { shell_fds | awk 'NR == FNR { broker[$0] = 1; next } $2 in broker' <(broker_targets) -; }
check "the shell holds no descriptor of a broker's (socket, log, database)" test -z "$(leaked)"
broker_targets >"$T_DIR/broker.targets"
http_inode=$(ss -ltne "sport = :${URL##*:}" | grep -o 'ino:[0-9]*' | head -1 | cut -d: -f2)
check "(that check sees rank 0's HTTP listener, socket:[$http_inode], among the brokers')" \
    grep -qx "socket:\[$http_inode\]" "$T_DIR/broker.targets"
check "the shell's environment has nothing of the broker's" \
    lacks '^(BNYT_FROM_BROKER|HWLOC_PLUGINS_PATH|GCONV_PATH)=' sh -c "tr '\\0' '\\n' </proc/$shell_pid/environ"
check "(the brokers have them)" \
    sh -c "tr '\\0' '\\n' </proc/$(svc_broker_pid 0)/environ | grep -q '^BNYT_FROM_BROKER=leaked$'"
check_output "and is made from nothing: HOME, USER, LOGNAME, SHELL, PATH" \
    "^HOME=.*LOGNAME=.*PATH=/usr/local/bin:/usr/bin:/bin SHELL=.* USER=$ALICE $" \
    sh -c "tr '\\0' '\\n' </proc/$shell_pid/environ | sort | tr '\\n' ' '"
check_output "the shell is not dumpable: its /proc files are root's, so her task cannot ptrace it" "^owner root$" \
    grep '^owner ' "$T_DIR/home/alice/probe.out"
check_fails "... nor read its memory" "Permission denied" as "$ALICE" head -c1 /proc/"$shell_pid"/mem
broker_oom=$(cat /proc/"$(svc_broker_pid 0)"/oom_score_adj)
task_oom=$(sed -n 's/^oom //p' "$T_DIR/home/alice/probe.out")
check "her task's oom_score_adj ($task_oom) is above the broker's ($broker_oom)" test "$task_oom" -gt "$broker_oom"
as "$ALICE" banyan cancel "$(cat "$T_DIR/probe.id")"
wait_for "the probe has ended" 20 sh -c "! kill -0 $task_pid 2>/dev/null"
rm "$T_DIR/home/alice/probe.out"
probe -o pmi=off >"$T_DIR/probe.id"
wait_for "alice's probe job without PMI reports" 30 grep -q '^task ' "$T_DIR/home/alice/probe.out"
task_pid=$(sed -n 's/^task //p' "$T_DIR/home/alice/probe.out")
check_output "without PMI a task holds 0, 1 and 2 only" "^0 1 2$" fds_of "$task_pid"
as "$ALICE" banyan cancel "$(cat "$T_DIR/probe.id")"

# --- Lines without end: cut at 512 KiB, the job told once, nothing lost.
as "$BOB" banyan run -l sh -c 'head -c 3000000 /dev/zero | tr "\0" x; echo; echo after' >"$T_DIR/long.out" 2>&1
long_summary() {
    echo "notices $(grep -c '^0: banyan-shell: a line over 524288 bytes was cut$' "$T_DIR/long.out")"
    echo "x $(grep -v 'was cut' "$T_DIR/long.out" | tr -cd x | wc -c)"
    echo "longest $(awk '{ if (length($0) > n) n = length($0) } END { print n }' "$T_DIR/long.out")"
    grep -c '^0: after$' "$T_DIR/long.out" | sed 's/^/after /'
}
long_summary | sed 's/^/    | /'
check_output "a labelled line over 512 KiB is cut, and the job told once" "^notices 1$" long_summary
check_output "no byte of it is lost" "^x 3000000$" long_summary
check_output "no line is longer than the cap and its label" "^longest 52429[01]$" long_summary
check_output "what follows it comes whole" "^after 1$" long_summary

# --- The helper: a credential is spent once per job and node of its R.
cat >"$T_DIR/one-slot.json" <<'JSON'
{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0}}}
JSON
chmod 644 "$T_DIR/one-slot.json"
signed() { as "$ALICE" sh -c "munge <'$T_DIR/one-slot.json'"; }
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
check_fails "a tmpdir the broker did not make is refused" "tmpdir .*/impjobs/none: No such file .*the broker makes it" \
    imp_bare "$(req 30 0 "$uid_a" "$J" "$T_DIR/impjobs/none" "$(R_of 0)")"
# (A shell started shows as its run directory made the user's.)
started() { imp "$1" >/dev/null 2>&1; stat -c %U "$(echo "$1" | sed 's/.*"tmpdir":"\([^"]*\)".*/\1/')"; }
check_output "... before the credential is spent: it then starts rank 0's shell" "^$ALICE$" \
    started "$(req 30 0 "$uid_a" "$J" "$T_DIR/impjobs/30" "$(R_of 0,1)")"
check_fails "a new rank number does not replay it: one slot holds one node" \
    "a replayed credential: it started 1 shells of .*, as many as the nodes its jobspec can hold" \
    imp "$(req 30 1 "$uid_a" "$J" "$T_DIR/impjobs/30b" "$(R_of 0,1)")"
check_fails "nor does a new job id" "a replayed credential: it started job .*, not " \
    imp "$(req 31 0 "$uid_a" "$J" "$T_DIR/impjobs/31" "$(R_of 0)")"
# munged reads the same credential from other texts; the record is keyed
# on the text, so only the plain form is taken.
check_fails "nor the same credential with a word after its last ':'" "not one MUNGE credential in its plain form" \
    imp "$(req 30 1 "$uid_a" "${J}x" "$T_DIR/impjobs/30c" "$(R_of 0,1)")"
check_fails "nor with a blank before it" "not one MUNGE credential in its plain form" \
    imp "$(req 30 1 "$uid_a" " $J" "$T_DIR/impjobs/30d" "$(R_of 0,1)")"
cat >"$T_DIR/two-nodes.json" <<'JSON'
{"version":1,"resources":[{"type":"node","count":2,"with":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0}}}
JSON
chmod 644 "$T_DIR/two-nodes.json"
J2=$(as "$ALICE" sh -c "munge <'$T_DIR/two-nodes.json'")
check_output "a two-node job's credential starts rank 0's shell" "^$ALICE$" \
    started "$(req 32 0 "$uid_a" "$J2" "$T_DIR/impjobs/32" "$(R_of 0,1)")"
check_output "and rank 1's, on a host with two brokers" "^$ALICE$" \
    started "$(req 32 1 "$uid_a" "$J2" "$T_DIR/impjobs/32b" "$(R_of 0,1)")"
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
sed 's/"J":"MUNGE:[^"]*"/"J":"MUNGE:AAAAforged:"/' "$T_DIR/stolen.json" >"$T_DIR/bob-forged.json"
chmod 644 "$T_DIR/bob-forged.json"
check_fails "a forged J is refused at submit" "J: the signature is refused by MUNGE" \
    as "$BOB" "$T_DIR/test-client" rpc job-manager.submit "@$T_DIR/bob-forged.json"
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

# --- Lower, each one real.
# A link planted in a shared directory does not redirect alice's output.
# (Not sticky, as a project's shared directory may be: in a sticky one the
# kernel's fs.protected_symlinks already refuses to follow it.)
install -d -m 0777 "$T_DIR/shared-tmp"
echo "alice's profile" >"$T_DIR/home/alice/.profile" && chown "$ALICE" "$T_DIR/home/alice/.profile"
as "$BOB" ln -s "$T_DIR/home/alice/.profile" "$T_DIR/shared-tmp/run.log"
check_fails "output to another user's symbolic link is refused, in one line" \
    "output file .*/shared-tmp/run.log: a symbolic link of uid $(id -u "$BOB"), not of the job's user: not followed" \
    as "$ALICE" banyan run --output="$T_DIR/shared-tmp/run.log" echo appended
check_output "her .profile is untouched" "^alice's profile$" cat "$T_DIR/home/alice/.profile"
as "$ALICE" ln -s "$T_DIR/home/alice/real.log" "$T_DIR/shared-tmp/mine.log"
as "$ALICE" banyan run --output="$T_DIR/shared-tmp/mine.log" echo through-her-link >/dev/null 2>&1
check_output "her own link is followed" "^through-her-link$" cat "$T_DIR/home/alice/real.log"
# An environment past MUNGE's 1 MiB: said so, not "is munged running?".
big=$(head -c 120000 /dev/zero | tr '\0' y)
check_fails "a jobspec too large to sign says so" \
    "^banyan submit: the job is too large to sign with MUNGE \([0-9]+ bytes of jobspec.*MUNGE takes 1 MiB\)" \
    as "$ALICE" env $(for i in $(seq 10); do echo "BIG$i=$big"; done) banyan submit true
check_output "REST names J among the fields it knows" "unknown field \(expected jobspec, or .*, exclusive, umask, J\)" \
    curl -s -H "Authorization: Bearer $ALICE_TOKEN" -H 'Content-Type: application/json' \
    --data-binary '{"command":["true"],"bogus":1}' "$URL/api/v1/jobs"
check_output "a broker says at start whether its jobs are held in cgroups" \
    "jobs are contained: each in a cgroup|exec.warning: no writable cgroup v2 hierarchy for this broker: jobs run without containment" \
    cat "$T_DIR/rank-0.log"
# ... and, where jobs are not, each job of a user says it once, in its output.
if grep -q "jobs are contained" "$T_DIR/rank-0.log"; then expected=0; else expected=1; fi
check_output "a job not held by a cgroup is told so in its output, once ($expected)" "^$expected$" \
    bash -c "as $ALICE banyan run -N2 -n2 true 2>&1 | grep -c 'runs without cgroup containment on rank'"
# Memory (--mem) for another user's job: limited where this broker may use
# a memory controller, and the job told once, from its first rank, where not.
check_output "a broker says at start where jobs' memory is limited" \
    "jobs' memory \(--mem\) is limited in|no memory controller this broker may use" cat "$T_DIR/rank-0.log"
if grep -q "jobs' memory (--mem) is limited in" "$T_DIR/rank-0.log"; then
    check_output "alice's job over its --mem ends as oom" "oom: out of memory on rank" \
        as "$ALICE" banyan run --mem=64M python3 -c 'b = bytearray(400 << 20)'
else
    check_output "alice's job whose --mem cannot be limited is told so, once" '^1$' \
        bash -c "as $ALICE banyan run -N2 --mem=64M true 2>&1 | grep -c 'does not limit this job.s memory to 64 MiB'"
fi
# What a job leaves in /dev/shm (POSIX shared memory, semaphores) goes with
# the user's last job on the node (all four brokers share this host), and
# only the user's.
shm=/dev/shm/bnyt-$$
rm -rf "$shm"-*
as "$BOB" touch "$shm-bob"
as "$ALICE" banyan run sh -c "touch $shm-alone; mkdir $shm-dir; touch $shm-dir/inside" >/dev/null 2>&1
check "her last job's /dev/shm files are gone when it has ended" test ! -e "$shm-alone" -a ! -e "$shm-dir"
check "bob's file is not touched" test -e "$shm-bob"
holder=$(as "$ALICE" banyan submit sh -c "touch $shm-holder; exec sleep 300")
wait_for "her holding job runs" 30 test -e "$shm-holder"
as "$ALICE" banyan run sh -c "touch $shm-second" >/dev/null 2>&1
check "while another job of hers runs here, a job's files stay" test -e "$shm-second" -a -e "$shm-holder"
as "$ALICE" banyan cancel "$holder"
as "$ALICE" banyan job wait "$holder" >/dev/null 2>&1
check "... and go with the last one" test ! -e "$shm-second" -a ! -e "$shm-holder"
check "bob's file is still there" test -e "$shm-bob"
rm -f "$shm-bob"

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
check_fails "nor into /etc" "Permission denied" as "$BOB" banyan run --output=/etc/bnyt-from-bob true
check_fails "bob cannot run the helper (not in its group)" "Permission denied" as "$BOB" "$IMP" exec
check_output "a path out of the dashboard's directory is not served" '^(400|404)$' \
    curl -s --path-as-is -o /dev/null -w '%{http_code}' "$URL/../../../../etc/passwd"
python3 -c "print('{\"jobspec\":' + '[' * 100000 + ']' * 100000 + '}')" >"$T_DIR/deep.json"
chmod 644 "$T_DIR/deep.json"
check_fails "JSON nested 100,000 deep is refused in one line" "^error 71: .*JSON nested deeper than 64 levels$" \
    as "$BOB" "$T_DIR/test-client" rpc job-manager.submit "@$T_DIR/deep.json"
# 10 MB of it: refused as soon as it is read, in the same line, not a reset
# connection.
python3 -c "print('{\"jobspec\":' + '[' * 5000000 + ']' * 5000000 + '}')" >"$T_DIR/deep.json"
check_fails "a 10 MB payload nested 5,000,000 deep is refused in the same line" \
    "^error 71: .*JSON nested deeper than 64 levels$" \
    as "$BOB" "$T_DIR/test-client" rpc job-manager.submit "@$T_DIR/deep.json"
check_output "... and over REST, in one line naming the limit" '^\{"message":"the body is over [0-9]+ bytes \(http.max-body\)","status":413\} 413$' \
    curl -s -w ' %{http_code}' -H "Authorization: Bearer $BOB_TOKEN" -H 'Content-Type: application/json' \
    --data-binary "@$T_DIR/deep.json" "$URL/api/v1/jobs"
check_output "a flood of bob's connections is cut at his limit" "^connections: [0-9]+ of 300 answered; refused: " \
    as "$BOB" "$T_DIR/test-client" connections 300
check_output "and alice is still served" "^$ALICE$" as "$ALICE" banyan run id -un
as "$ALICE" banyan cancel "$job"
