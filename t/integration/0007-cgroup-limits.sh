#!/bin/bash
# A broker confined like a pod — a real cgroup with a CPU quota of one
# core and a 1 GiB memory limit — advertises one core and 1 GiB, not the
# machine. Uses cgroup v1 (cpu, memory hierarchies) or v2 (cpu.max,
# memory.max), whichever this host has; skips where it cannot make one.
. "$(dirname "$0")/lib.sh"

name=banyan-test-$$
own_path() { sed -n "s/^[0-9]*:$1:\(.*\)$/\1/p" /proc/self/cgroup | head -1; }
if [ -d /sys/fs/cgroup/cpu ] && [ -d /sys/fs/cgroup/memory ]; then
    cpu=/sys/fs/cgroup/cpu$(own_path 'cpu\(,cpuacct\)\?')/$name
    mem=/sys/fs/cgroup/memory$(own_path memory)/$name
    cpu=${cpu//\/\//\/}
    mem=${mem//\/\//\/}
    if mkdir -p "$cpu" "$mem" 2>/dev/null && echo 100000 >"$cpu/cpu.cfs_period_us" &&
        echo 100000 >"$cpu/cpu.cfs_quota_us" && echo 1073741824 >"$mem/memory.limit_in_bytes"; then
        CLEANUP+=("rmdir $cpu $mem")
        enter="echo \$\$ > $cpu/cgroup.procs && echo \$\$ > $mem/cgroup.procs"
    fi
elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    dir=/sys/fs/cgroup/$name
    if mkdir "$dir" 2>/dev/null && echo "100000 100000" >"$dir/cpu.max" && echo 1073741824 >"$dir/memory.max"; then
        CLEANUP+=("rmdir $dir")
        enter="echo \$\$ > $dir/cgroup.procs"
    fi
fi
if [ -z "${enter:-}" ]; then
    echo "skip: cannot make a cgroup with CPU and memory limits here"
    exit "$SKIP_CODE"
fi
if [ "$(nproc --all)" -lt 2 ]; then
    echo "skip: needs a machine with at least 2 cores to see a 1-core limit"
    exit "$SKIP_CODE"
fi

check_output "a broker in a 1-CPU, 1 GiB cgroup advertises 1 core" '"free":\{"ncores":1,' \
    sh -c "$enter && exec banyan start --test-size=1 banyan resource list --json"
check_output "and 1024 MiB of memory" "this node: 1 cores, 0 gpus, 1024 MiB" \
    sh -c "$enter && exec banyan start --test-size=1 banyan dmesg"
check_output "outside it, the same machine advertises all its cores" "\"free\":\\{\"ncores\":$(nproc)," \
    banyan start --test-size=1 banyan resource list --json
