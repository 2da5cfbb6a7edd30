# Shared by the integration tests: assertions, waiting, and clean-up that
# makes sure no broker outlives its test. Source it first.
set -uo pipefail

T_DIR=$(mktemp -d /tmp/banyan-test-XXXXXX)
chmod 755 "$T_DIR"
export T_DIR
export RESULTS=$T_DIR/results
: >"$RESULTS"
export SKIP_CODE=77

# What the last check's command printed: $T_DIR/last.out in the test
# itself (tests copy it), a file of its own in any other process that
# checks (a script the test runs in an instance, polling with wait_for),
# which would otherwise empty the test's file under its grep.
export T_MAIN_PID=$$
last_out() {
    if [ "$BASHPID" = "$T_MAIN_PID" ]; then LAST_OUT=$T_DIR/last.out; else LAST_OUT=$T_DIR/last.$BASHPID.out; fi
}

ok() { echo "ok - $*"; echo ok >>"$RESULTS"; }
not_ok() { echo "not ok - $*"; echo fail >>"$RESULTS"; }

# check DESC CMD...: CMD must succeed.
check() {
    local LAST_OUT
    last_out
    local desc=$1
    shift
    if "$@" >"$LAST_OUT" 2>&1; then ok "$desc"; else
        not_ok "$desc"
        sed 's/^/    | /' "$LAST_OUT"
    fi
}

# check_output DESC REGEX CMD...: CMD's output (stdout and stderr) must match REGEX.
check_output() {
    local LAST_OUT
    last_out
    local desc=$1 regex=$2
    shift 2
    "$@" >"$LAST_OUT" 2>&1
    if grep -Eq -- "$regex" "$LAST_OUT"; then ok "$desc"; else
        not_ok "$desc (expected /$regex/)"
        sed 's/^/    | /' "$LAST_OUT"
    fi
}

# check_fails DESC REGEX CMD...: CMD must fail and say something matching REGEX.
check_fails() {
    local LAST_OUT
    last_out
    local desc=$1 regex=$2
    shift 2
    if "$@" >"$LAST_OUT" 2>&1; then
        not_ok "$desc (it succeeded)"
        sed 's/^/    | /' "$LAST_OUT"
    elif grep -Eq -- "$regex" "$LAST_OUT"; then ok "$desc"; else
        not_ok "$desc (expected /$regex/)"
        sed 's/^/    | /' "$LAST_OUT"
    fi
}

# wait_for DESC SECONDS CMD...: retries CMD every 50 ms until it succeeds.
wait_for() {
    local LAST_OUT
    last_out
    local desc=$1 seconds=$2
    shift 2
    local start=$SECONDS
    while ! "$@" >"$LAST_OUT" 2>&1; do
        if ((SECONDS - start >= seconds)); then
            not_ok "$desc (not within ${seconds}s)"
            sed 's/^/    | /' "$LAST_OUT"
            return 1
        fi
        sleep 0.05
    done
    ok "$desc"
}

# Hosts in network namespaces, for the multi-host tests (0005, fault/4002).
# make_hosts TAG N: a bridge in namespace TAG-sw and N hosts TAG-n0 ... on
# it, host I at host_addr I on its eth0 (the bridge's side of its link is
# sv I), and every host's /etc/hosts naming node0 ... as HOST_ADDR says.
# The test is skipped where namespaces cannot be made.
host_addr() { echo "192.0.2.$((10 + $1))"; }  # documentation addresses: never a real host
make_hosts() {
    local tag=$1 n=$2 i
    if ! ip netns add "$tag-sw" 2>"$T_DIR/netns.err"; then
        echo "skip: cannot create network namespaces here: $(cat "$T_DIR/netns.err")"
        exit "$SKIP_CODE"
    fi
    CLEANUP+=("ip netns del $tag-sw")
    ip -n "$tag-sw" link add br0 type bridge
    ip -n "$tag-sw" link set br0 up
    HOST_ADDR=()
    for ((i = 0; i < n; i++)); do
        HOST_ADDR+=("$(host_addr "$i")")
        ip netns add "$tag-n$i"
        CLEANUP+=("ip netns del $tag-n$i" "rm -rf /etc/netns/$tag-n$i")
        ip -n "$tag-sw" link add "sv$i" type veth peer name eth0 netns "$tag-n$i"
        ip -n "$tag-sw" link set "sv$i" master br0 up
        ip -n "$tag-n$i" addr add "${HOST_ADDR[$i]}/24" dev eth0
        ip -n "$tag-n$i" link set eth0 up
        ip -n "$tag-n$i" link set lo up
    done
    write_hosts "$tag"
}
# write_hosts TAG: each host's /etc/hosts, from HOST_ADDR (again after a
# host moved).
write_hosts() {
    local tag=$1 i h
    for i in "${!HOST_ADDR[@]}"; do
        mkdir -p "/etc/netns/$tag-n$i"
        { echo "127.0.0.1 localhost"; for h in "${!HOST_ADDR[@]}"; do echo "${HOST_ADDR[$h]} node$h"; done; } \
            >"/etc/netns/$tag-n$i/hosts"
    done
}
# host_broker TAG I CONFIG: node I's broker, in its namespace, under its
# own host name, with its run directory $T_DIR/nodeI.
host_broker() {
    mkdir -p "$T_DIR/node$2"
    ip netns exec "$1-n$2" unshare --uts sh -c \
        "hostname node$2 && exec banyan-broker --config $3 --rundir $T_DIR/node$2" >>"$T_DIR/node$2.log" 2>&1 &
}

# lacks REGEX CMD...: CMD succeeds and nothing it prints matches REGEX (a
# negative check written `! CMD | grep -q` would pass when CMD fails).
lacks() {
    local regex=$1 out
    shift
    out=$("$@" 2>&1) || { echo "$out"; return 1; }
    ! grep -Eq -- "$regex" <<<"$out"
}

# The test instance's directory, from BANYAN_URI (inside `banyan start`).
instance_dir() {
    local uri=${BANYAN_URI#local://}
    echo "${uri%/rank-0/local.sock}"
}

# The pid of rank R's broker of the instance in directory DIR.
broker_pid() { pgrep -f -- "--rank $2 --rundir $1/rank-$2( |$)" | head -1; }

# Lists process PID's descriptors above 2 that are not close-on-exec
# (O_CLOEXEC in /proc/PID/fdinfo's flags), one line each; nothing when
# every one is. Every descriptor a broker opens must be (DESIGN.md).
open_without_cloexec() {
    local f n flags
    for f in /proc/"$1"/fd/*; do
        n=${f##*/}
        [ "$n" -le 2 ] && continue
        flags=$(awk '/^flags:/ {print $2}' "/proc/$1/fdinfo/$n" 2>/dev/null) || continue
        [ -n "$flags" ] && (((8#$flags & 8#2000000) == 0)) && echo "fd $n ($(readlink "$f")) flags $flags"
    done
    return 0
}

# True in a sanitizer build (AddressSanitizer linked in). grep reads all of
# ldd's output: with -q, ldd could die of SIGPIPE and pipefail say false.
sanitized() { ldd "$(command -v banyan-broker)" | grep libasan >/dev/null; }

# Rank 0's database directory of the instance in directory DIR: its
# --statedir (a test instance's is on disk), else DIR/rank-0/state.
state_dir() {
    local given
    given=$(ps -o args= -p "$(broker_pid "$1" 0)" | grep -o -- '--statedir [^ ]*' | cut -d' ' -f2)
    echo "${given:-$1/rank-0/state}"
}

# no_brokers_left DESC PATTERN: no process whose command line has PATTERN.
no_brokers_left() {
    local desc=$1 pattern=$2 i
    for i in $(seq 100); do
        pgrep -f -- "banyan-broker.*$pattern" >/dev/null || { ok "$desc"; return; }
        sleep 0.05
    done
    not_ok "$desc"
    pgrep -af -- "banyan-broker.*$pattern" | sed 's/^/    | /'
}

# Commands a test registers to run at exit, whatever happens.
CLEANUP=()
finish() {
    local rc=$? c
    for c in "${CLEANUP[@]}"; do eval "$c" >/dev/null 2>&1; done
    # Anything this test started by hand goes, whatever happened.
    pkill -KILL -f -- "banyan-broker.*$T_DIR" 2>/dev/null
    local passed failed
    passed=$(grep -c '^ok$' "$RESULTS")
    failed=$(grep -c '^fail$' "$RESULTS")
    # A failure far from here (CI) is read from this output alone: the
    # brokers' last words go with it.
    if [ "$failed" != 0 ] || { [ "$rc" != 0 ] && [ "$rc" != "$SKIP_CODE" ]; }; then
        local log
        for log in "$T_DIR"/rank-*.log "$T_DIR"/node*.log; do
            [ -s "$log" ] || continue
            echo "--- last lines of ${log#"$T_DIR"/}"
            tail -n 25 "$log" | sed 's/^/    | /'
        done
    fi
    rm -rf "$T_DIR"
    if [ "$rc" = "$SKIP_CODE" ]; then
        echo "skipped"
        exit "$SKIP_CODE"
    fi
    echo "$passed passed, $failed failed"
    if [ "$failed" = 0 ] && [ "$passed" -gt 0 ] && [ "$rc" = 0 ]; then exit 0; fi
    exit 1
}
trap finish EXIT

export -f ok not_ok last_out check check_output check_fails wait_for lacks instance_dir broker_pid state_dir sanitized no_brokers_left \
    open_without_cloexec

# need_root WHY: skip (77), saying why, unless this test runs as root.
need_root() {
    [ "$(id -u)" = 0 ] || { echo "needs root: $1"; exit "$SKIP_CODE"; }
}
# need_cores N WHY: skip (77), saying why, unless this test may run on N
# CPUs or more (nproc: the affinity mask, which a test instance's brokers
# each take as their node's cores). Run under `taskset -c 0`, these tests
# failed for want of a second core; the rest pass on one.
need_cores() {
    [ "$(nproc)" -ge "$1" ] || { echo "needs $1 cores (this test may use $(nproc)): $2"; exit "$SKIP_CODE"; }
}
# need_tools TOOL...: skip (77) unless every TOOL is on PATH.
need_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "needs $tool (scripts/install-deps)"; exit "$SKIP_CODE"; }
    done
}

# A munged that answers: started as user munge with the package's key unless
# one answers already, and stopped at the end only if this test started it.
# Tests that call this hold the ctest RESOURCE_LOCK munged (t/CMakeLists.txt).
need_munged() {
    need_tools munged
    if ! echo | munge >/dev/null 2>&1; then
        install -d -o munge -g munge -m 0755 /run/munge
        runuser -u munge -- /usr/sbin/munged --num-threads=2 2>"$T_DIR/munged.log" && CLEANUP+=("pkill -x munged")
    fi
    wait_for "munged answers" 10 sh -c 'echo | munge >/dev/null 2>&1' || { cat "$T_DIR/munged.log"; exit 1; }
}

# A TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
    local port
    while :; do
        # Below the kernel's ephemeral range (32768-60999 by default): a
        # port there may be taken by any outgoing connection meanwhile.
        port=$((20000 + RANDOM % 12760))
        ss -ltnH "sport = :$port" | grep -q . || { echo "$port"; return; }
    done
}

# write_config FILE SIZE PORT CERT [EXTRA_TOML]: a hostless cluster on loopback TCP.
# Each rank listens on PORT at an address of its own in 127/8 (rank R at
# 127.0.R.1): any size up to 256 ranks, one free port.
write_config() {
    cat >"$1" <<TOML
[bootstrap]
size = $2
port = $3
bind = "tcp://127.0.%r.1:%p"
connect = "tcp://127.0.%r.1:%p"
curve_cert = "$4"
[tbon]
fanout = 2
hello_timeout = "0.5s"
connect_max_backoff = "0.5s"
${5:-}
TOML
}

# start_broker CONFIG RANK [ARGS...]: one broker in the background, logging
# to $T_DIR/rank-RANK.log, its local socket in $T_DIR/rank-RANK/; the
# program is $BANYAN_BROKER if set (another build's broker).
start_broker() {
    local config=$1 rank=$2
    shift 2
    mkdir -p "$T_DIR/rank-$rank"
    "${BANYAN_BROKER:-banyan-broker}" --config "$config" --rank "$rank" --rundir "$T_DIR/rank-$rank" "$@" \
        >>"$T_DIR/rank-$rank.log" 2>&1 &
}

uri_of() { echo "local://$T_DIR/rank-$1/local.sock"; }

# write_waiting_task: $T_DIR/task.sh, a task that says it started, waits
# until the file named by its argument exists, and says it ends.
# waiting_tasks_are FILE N: N such tasks wait for FILE.
write_waiting_task() {
    cat >"$T_DIR/task.sh" <<'EOF'
echo "task $BANYAN_TASK_RANK started"
while [ ! -e "$1" ]; do sleep 0.1; done
echo "task $BANYAN_TASK_RANK ends"
EOF
}
waiting_tasks_are() { [ "$(pgrep -fc "task.sh $1\$")" -eq "$2" ]; }
# job_on_both [SUBMIT OPTION...]: a job of two such tasks, on ranks 0 and
# 1, waiting for $T_DIR/go-$marker (marker counts up); sets id.
job_on_both() {
    marker=$((marker + 1))
    id=$(banyan submit -N2 -n2 "$@" bash "$T_DIR/task.sh" "$T_DIR/go-$marker")
    wait_for "a job runs on both ranks" 20 waiting_tasks_are "$T_DIR/go-$marker" 2
}
# runs_on_to_its_end: job_on_both's job is let go and ends on its own,
# with both tasks' output and no exception.
runs_on_to_its_end() {
    touch "$T_DIR/go-$marker"
    check "the job ends on its own, with status 0" timeout 30 banyan job wait "$id"
    check "no exception was raised" lacks "exception" banyan job eventlog "$id"
    check_output "both tasks wrote to their end" "task 0 ends.*task 1 ends|task 1 ends.*task 0 ends" \
        sh -c "banyan job attach $id | tr '\n' ' '"
}

# all_up SIZE: rank 0 sees ranks 0 to SIZE-1 online.
all_up() { banyan overlay status -s | grep -q "^online: 0-$(($1 - 1)) ($1)\$"; }

# start_cluster SIZE [EXTRA_TOML]: SIZE configured brokers on loopback TCP
# ($T_DIR/c.toml; EXTRA_TOML goes into its [tbon] table), BANYAN_URI at
# rank 0; returns once all are up.
start_cluster() {
    local r
    banyan keygen "$T_DIR/cert" >/dev/null
    write_config "$T_DIR/c.toml" "$1" "$(free_port)" "$T_DIR/cert" "${2:-}"
    for r in $(seq 0 $(($1 - 1))); do start_broker "$T_DIR/c.toml" "$r"; done
    BANYAN_URI=$(uri_of 0)
    export BANYAN_URI
    wait_for "$1 brokers up" 20 all_up "$1"
}
export -f free_port write_config start_broker uri_of all_up start_cluster
