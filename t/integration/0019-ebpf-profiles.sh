#!/bin/bash
# eBPF job profiles (--profile-ebpf, doc/spec/profiling.md) on a real
# 2-broker instance: a contended futex shows on the rank that waited; an
# Open MPI job over TCP shows bytes between the right tasks; a job reading
# a file shows its path, prefix and bytes; shared-memory MPI shows its
# segments; two profiled jobs on a node are told apart; a job not profiled
# leaves nothing in the maps, and once no job is profiled no program is
# attached; bad requests are refused in one line, an unprivileged
# instance says why, and :optional runs unprofiled there.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
need_root "the programs are loaded as root"
need_tools bpftool python3
[ -r /sys/kernel/btf/vmlinux ] || { echo "this kernel has no BTF"; exit "$SKIP_CODE"; }
[ -x "$BANYAN_BUILD_DIR/bin/banyan-profiler" ] || { echo "banyan-profiler is not built (clang, bpftool, libbpf)"; exit 1; }
MPI_DIR=${BANYAN_MPI_DIR:?the MPI test programs (BANYAN_MPI_DIR)}
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo UCX_NET_DEVICES=lo
export OMPI_MCA_mpi_yield_when_idle=1

start_cluster 2 '[http]
listen = "127.0.0.1:0"
open = ["/metrics"]'
wait_for "the instance runs" 20 banyan ready
URL=http://$(banyan uptime | sed -n 's,.*http http://,,p')
cd "$T_DIR" || exit 1
profile() { banyan job profile --json "$1"; }
# profile_is ID FILTER: the job's profile (JSON) makes jq's FILTER true;
# false, not vacuously true, when there is no profile to read.
profile_is() {
    banyan job profile --json "$1" >"$T_DIR/profile.json" && [ -s "$T_DIR/profile.json" ] &&
        jq -e "$2" "$T_DIR/profile.json" >/dev/null
}
# The entries of the profilers' map NAME (one profiler per broker here:
# bpftool lists each map's elements when a name matches several).
map_entries() {
    bpftool map dump name "$1" -j | jq -c 'if (.[0] // {}) | has("elements") then [.[].elements[]] else . end'
}
# jq_is [JQ OPTIONS] FILTER FILE: as jq -e, but false for an empty FILE
# (jq -e takes no input as success).
jq_is() { [ -s "${@: -1}" ] && jq -e "$@" >/dev/null; }
export -f profile profile_is map_entries jq_is

# A futex only task 1 fights over: four threads, one lock.
cat >"$T_DIR/contend.py" <<'EOF'
import os, threading
if os.environ["BANYAN_TASK_RANK"] == "1":
    lock = threading.Lock()
    def spin():
        for _ in range(40000):
            with lock:
                pass
    threads = [threading.Thread(target=spin) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
EOF
id=$(banyan submit -N2 -n2 --profile-ebpf=futex,cpu python3 "$T_DIR/contend.py")
banyan job wait "$id" >/dev/null
profile "$id" >"$T_DIR/futex.json"
check "futex: task 1 waited on futexes" \
    jq_is '[.ranks[].ranks["1"] // empty][0].futex.waits > 10' "$T_DIR/futex.json"
check "... task 0 (no threads) far less" \
    jq_is '([.ranks[].ranks["0"] // empty][0].futex.waits // 0) < ([.ranks[].ranks["1"] // empty][0].futex.waits / 4)' \
    "$T_DIR/futex.json"
check "... and the histogram counts every wait" \
    jq_is '[.ranks[].ranks["1"] // empty][0].futex | (.hist | add) == .waits' "$T_DIR/futex.json"
check "cpu: each task has on-CPU time and switches" \
    jq_is '[.ranks[].ranks[] | .cpu.oncpu > 0 and .cpu.switches > 0] | all and length == 2' "$T_DIR/futex.json"
check "the profile of an ended job is complete" jq_is '.complete' "$T_DIR/futex.json"
# A task that keeps a CPU busy 2 s (and forks a `date` a turn): its time,
# its children's too, and its last slice, which no switch ends.
spin=$(banyan submit -n1 --profile-ebpf=cpu sh -c 'end=$(($(date +%s) + 3)); while [ "$(date +%s)" -lt $end ]; do :; done')
banyan job wait "$spin" >/dev/null
profile "$spin" >"$T_DIR/spin.json"
check "cpu: a task busy for 2-3 s shows over 1.5 s on a CPU" jq_is '.ranks[].ranks["0"].cpu.oncpu > 1.5' "$T_DIR/spin.json"
check_output "the report names the task that waited most" "^  task 1 on node [01]: .* in [0-9]+ waits" \
    sh -c "banyan job profile $id | grep -A1 'Waited most on futexes' | tail -1"

# Open MPI over TCP between two brokers: bytes between tasks 0 and 1.
id=$(banyan submit -N2 -n2 --profile-ebpf=tcp --env OMPI_MCA_btl=tcp,self "$MPI_DIR/mpi-halo" 100000 50)
banyan job wait "$id" >/dev/null
profile "$id" >"$T_DIR/tcp.json"
# Each task's connections; a peer is the other task when its address is
# where the other task's end of a connection is.
check "tcp: task 0 sent bytes to task 1's end of a connection" \
    jq_is '[.ranks[].tcp[]] as $all | [$all[] | select(.rank == "0") | .peer as $p |
            select(any($all[]; .rank == "1" and .local == $p)) | .sent] | add > 1000' "$T_DIR/tcp.json"
check "... and task 1 to task 0's" \
    jq_is '[.ranks[].tcp[]] as $all | [$all[] | select(.rank == "1") | .peer as $p |
            select(any($all[]; .rank == "0" and .local == $p)) | .sent] | add > 1000' "$T_DIR/tcp.json"
check "... over loopback addresses, as the job was told" \
    jq_is '[.ranks[].tcp[] | .local | startswith("127.")] | all and length > 0' "$T_DIR/tcp.json"
check_output "the report names the peer task" "task 0 -> task 1 \(127\.0\.0\.1:[0-9]+\): sent" banyan job profile "$id"

# A file read: its path, prefix and bytes.
mkdir -p "$T_DIR/data"
head -c 3000000 /dev/zero >"$T_DIR/data/input.bin"
id=$(banyan submit -n1 --profile-ebpf=file --output=/dev/null cat "$T_DIR/data/input.bin")
banyan job wait "$id" >/dev/null
profile "$id" >"$T_DIR/file.json"
check "file: the file read, by its path, with its bytes" \
    jq_is --arg p "$T_DIR/data/input.bin" '[.ranks[].files[] | select(.path == $p) | .read_bytes] | add == 3000000' \
    "$T_DIR/file.json"
check "... its file system named" \
    jq_is --arg p "$T_DIR/data/input.bin" '[.ranks[].files[] | select(.path == $p) | .fs | length > 0] | all and length > 0' \
    "$T_DIR/file.json"
prefix=$(echo "$T_DIR" | cut -d/ -f1-3)
check "... and its path prefix counts it" \
    jq_is --arg p "$prefix" '[.ranks[].prefixes[] | select(.prefix == $p) | .read_bytes] | add >= 3000000' \
    "$T_DIR/file.json"

# Shared-memory MPI on one node: its segments.
id=$(banyan submit -N1 -n2 --profile-ebpf=shm "$MPI_DIR/mpi-ring")
banyan job wait "$id" >/dev/null
profile "$id" >"$T_DIR/shm.json"
check "shm: Open MPI's /dev/shm segments, opened and mapped by both tasks" \
    jq_is '[.ranks[].shm[] | select(.kind == "posix" and .maps > 0 and .size > 0) | .rank] | unique == ["0", "1"]' \
    "$T_DIR/shm.json"
cat >"$T_DIR/sysv.py" <<'EOF'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shmid = libc.shmget(0x62616e79, 1 << 20, 0o1600)  # IPC_CREAT | 0600
assert shmid >= 0 and libc.shmat(shmid, None, 0) not in (None, ctypes.c_void_p(-1).value)
libc.shmctl(shmid, 0, None)  # IPC_RMID
EOF
id=$(banyan submit -n1 --profile-ebpf=shm python3 "$T_DIR/sysv.py")
banyan job wait "$id" >/dev/null
profile "$id" >"$T_DIR/sysv.json"
check "... a SysV segment by its key, with its size, attached once" \
    jq_is '[.ranks[].shm[] | select(.name == "SYSV62616e79")][0] | .kind == "sysv" and .size == 1048576 and .maps == 1' \
    "$T_DIR/sysv.json"

# Two profiled jobs on one node at once, and a third not profiled (on the
# other node, whose profiler runs too).
head -c 1000000 /dev/zero >"$T_DIR/data/a.bin"
head -c 2000000 /dev/zero >"$T_DIR/data/b.bin"
go=$T_DIR/go
a=$(banyan submit -n1 --requires=rank:0 --profile-ebpf=file sh -c "touch $T_DIR/a.up; while [ ! -e $go ]; do sleep 0.05; done; cat $T_DIR/data/a.bin >/dev/null")
b=$(banyan submit -n1 --requires=rank:0 --profile-ebpf=file sh -c "touch $T_DIR/b.up; while [ ! -e $go ]; do sleep 0.05; done; cat $T_DIR/data/b.bin >/dev/null")
c=$(banyan submit -n1 --requires=rank:1 sh -c "echo \$\$ >$T_DIR/c.pid; while [ ! -e $go ]; do sleep 0.05; done; cat $T_DIR/data/b.bin >/dev/null")
wait_for "the three jobs run" 30 test -e "$T_DIR/a.up" -a -e "$T_DIR/b.up" -a -s "$T_DIR/c.pid"
check "the profiled jobs are in the profiler's process map" \
    bash -c "map_entries tracked | jq -e 'length >= 4'"
check "... a job not profiled is not" \
    bash -c "! map_entries tracked | jq -e --argjson pid $(cat "$T_DIR/c.pid") '.[] | select(.key == \$pid)'"
touch "$go"
banyan job wait "$a" >/dev/null; banyan job wait "$b" >/dev/null; banyan job wait "$c" >/dev/null
check "two jobs on one node are told apart: the first read a.bin only" \
    profile_is "$a" "[.ranks[].files[].path] | (index(\"$T_DIR/data/a.bin\") != null) and (index(\"$T_DIR/data/b.bin\") == null)"
check "... the second b.bin only" \
    profile_is "$b" "[.ranks[].files[].path] | (index(\"$T_DIR/data/b.bin\") != null) and (index(\"$T_DIR/data/a.bin\") == null)"
check_fails "a job not profiled has no profile" "the job was not profiled" banyan job profile "$c"
# (The programs stay loaded in the profiler; attached, a link holds them.
# Detached 30 s after their last job: a detach costs an RCU grace period.)
ours=$(bpftool prog show -j | jq -c '[.[] | select(.name | test("^(cpu|futex|tcp|shm|file|track)_")) | .id]')
attached() {
    bpftool link show -j | jq -e --argjson ours "$ours" '[.[] | select(.prog_id as $p | $ours | index($p))] | length > 0'
}
export -f attached
export ours
check "right after the last profiled job its programs are still attached" attached
check "... and detached within a minute: no program of the profiler is attached" \
    wait_for "the programs detached" 60 bash -c '! attached >/dev/null'
check "... and nothing of the jobs is left in its maps" \
    bash -c "[ \$(map_entries tracked | jq length) = 0 ] && [ \$(map_entries file_stats | jq length) = 0 ]"

# While a job runs: samples every interval.
id=$(banyan submit -n1 --profile-ebpf=cpu --profile-ebpf-interval=1 sh -c "while [ ! -e $T_DIR/stop ]; do :; done")
check "a running job's profile has two samples within 30 s (one a second)" \
    wait_for "two samples of a running job" 30 profile_is "$id" '.series | length >= 2'
check "... with its on-CPU time growing" profile_is "$id" '.series[-1][1].oncpu > .series[0][1].oncpu'
check "... not yet complete" profile_is "$id" '.complete == false'

curl -s "$URL/metrics" >"$T_DIR/metrics"
check_output "/metrics has the running job's on-CPU seconds" \
    "^banyan_job_profile_cpu_seconds_total\\{job=\"$id\"\\} [0-9.e+-]*[1-9]" cat "$T_DIR/metrics"
check "... and promtool finds the exposition valid" promtool check metrics <"$T_DIR/metrics"
check_output "the REST API gives the profile (GET /api/v1/jobs/ID/profile)" '"programs":\["cpu"\]' \
    curl -s -H "Authorization: Bearer $(banyan token create)" "$URL/api/v1/jobs/$id/profile"
touch "$T_DIR/stop"
banyan job wait "$id" >/dev/null

# Bad input: one line each, nothing submitted.
check_fails "an unknown program is refused" "^banyan submit: --profile-ebpf=cpu,gpu: no program \"gpu\"" \
    banyan submit --profile-ebpf=cpu,gpu true
check_fails "an interval out of range is refused" "^banyan submit: --profile-ebpf-interval=0.5: expected 1 to 3600 seconds" \
    banyan submit --profile-ebpf=cpu --profile-ebpf-interval=0.5 true
check_fails "an interval without programs is refused" "only with --profile-ebpf" banyan submit --profile-ebpf-interval=5 true
spec='{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],
 "tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],
 "attributes":{"system":{"cwd":"/","duration":0,"ebpf":{"programs":["gpu"]}}}}'
check_fails "a jobspec naming an unknown program is refused by the job manager" \
    'attributes.system.ebpf.programs: no program .gpu.' \
    banyan-test-client rpc job-manager.submit "$(jq -c -n --argjson s "$spec" '{jobspec: $s}')"

# The profiler itself (root): it watches only shells of the broker that
# started it, and answers bad requests in one line.
coproc PROFILER { "$BANYAN_BUILD_DIR/bin/banyan-profiler"; }
profiler_pid=$PROFILER_PID  # (bash unsets PROFILER_PID once it has reaped the coprocess)
ask_profiler() { echo "$1" >&"${PROFILER[1]}" && read -r -t 30 answer <&"${PROFILER[0]}" && echo "$answer"; }
read -r -t 30 ready <&"${PROFILER[0]}"
check_output "banyan-profiler loads all five programs" '^\{"ready":true,"refused":\{\}\}$' echo "$ready"
check_output "... refuses to watch a process that is not its parent's child (pid 1)" \
    '"error":"pid 1 is not a job shell of this broker"' ask_profiler '{"op":"track","job":5,"pid":1,"programs":["cpu"]}'
sleep 600 &
check_output "... or any other process of the node" "\"error\":\"pid $! is not a job shell of this broker\"" \
    ask_profiler "{\"op\":\"track\",\"job\":5,\"pid\":$!,\"programs\":[\"cpu\"]}"
kill $!
check_output "... an unknown program" '"error":"no profile program is named gpu"' \
    ask_profiler '{"op":"track","job":5,"pid":1,"programs":["gpu"]}'
check_output "... a line that is not JSON" '^\{"error":"a request is one JSON object on a line"\}$' ask_profiler 'nonsense'
check_output "... a job it does not watch" '"error":"job 6 is not profiled here"' ask_profiler '{"op":"read","job":6}'
exec {PROFILER[1]}>&-
wait "$profiler_pid" 2>/dev/null || true  # (reaped already: nothing to wait for)

# A site's policy (banyan.toml [profiling]): off, some users, some queues.
check_fails "profiling.enable = false refuses a profiled job in one line" \
    "^banyan submit: eBPF profiling is off on this instance \(banyan.toml: profiling.enable\)$" \
    banyan start --test-size=1 -S profiling.enable=false -- banyan submit --profile-ebpf=cpu true
check_fails "profiling.users without this user refuses it" "uid $(id -u) may not profile jobs \(banyan.toml: profiling.users\)" \
    banyan start --test-size=1 -S 'profiling.users=["nobody"]' -- banyan submit --profile-ebpf=cpu true
check_output "... with this user, it runs" "^ran$" \
    banyan start --test-size=1 -S "profiling.users=[\"$(id -un)\"]" -- banyan run --profile-ebpf=cpu echo ran
check_fails "... an unknown user there is a config error, named" 'profiling.users: no user is named "no-such-user-x"' \
    banyan start --test-size=1 -S 'profiling.users=["no-such-user-x"]' -- true
check_fails "profiling.queues refuses a job of another queue" \
    "jobs in queue 'batch' may not be profiled \(banyan.toml: profiling.queues\)" \
    banyan start --test-size=1 -S queues.debug.max-nodes=1 -S queues.batch.default=true -S 'profiling.queues=["debug"]' \
    -- banyan submit --profile-ebpf=cpu true
check_output "... and runs one of its queue" "^ran$" \
    banyan start --test-size=1 -S queues.debug.max-nodes=1 -S queues.batch.default=true -S 'profiling.queues=["debug"]' \
    -- banyan run -q debug --profile-ebpf=cpu echo ran

# A batch job profiled: its script and what it runs (its instance's jobs).
printf '#!/bin/sh\nbanyan run cat %s/data/input.bin >/dev/null\n' "$T_DIR" >"$T_DIR/batch.sh"
bid=$(banyan batch --profile-ebpf=file "$T_DIR/batch.sh")
banyan job wait "$bid" >/dev/null
profile "$bid" >"$T_DIR/batch.json"
check "banyan batch --profile-ebpf: the file read by a job of the batch instance is in its profile" \
    jq_is --arg p "$T_DIR/data/input.bin" '[.ranks[].files[] | select(.path == $p) | .read_bytes] | add == 3000000' \
    "$T_DIR/batch.json"

# An instance that is not root and has no banyan-imp cannot load programs.
user=nobody
home=$T_DIR/nobody
mkdir -p "$home" && chown "$user" "$home"
as_user() { runuser -u "$user" -- env HOME="$home" PATH="$PATH" TMPDIR="$home" "$@"; }
check_fails "an unprivileged instance refuses a profiled job in one line" \
    "eBPF profiling needs root: this instance runs as uid [0-9]+, without exec.imp" \
    as_user banyan start --test-size=1 -- banyan run --profile-ebpf=cpu true
check_output "... and runs it unprofiled with :optional, saying why" \
    "banyan: eBPF profiling on rank 0: eBPF profiling needs root.*runs unprofiled here" \
    as_user banyan start --test-size=1 -- banyan run --profile-ebpf=cpu:optional echo ran
