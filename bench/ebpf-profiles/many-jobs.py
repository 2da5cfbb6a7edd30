"""1,000 profiled jobs on one node, as banyan-profiler sees them: this
process plays the broker (the profiler's parent), starts one shell per
job (a child that forks a task and waits), has each tracked with all five
programs, then reports the memory of the maps (bpftool's memlock: hash
maps are not preallocated, so this is what the jobs use) and the profiler's resident
set, and what one tick's `read` of all of them costs."""
import json, os, subprocess, sys, time

profiler_path, jobs = sys.argv[1], int(sys.argv[2])
prof = subprocess.Popen([profiler_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
assert json.loads(prof.stdout.readline()).get("ready"), "the profiler did not load"

def ask(request):
    prof.stdin.write(json.dumps(request) + "\n")
    prof.stdin.flush()
    answer = json.loads(prof.stdout.readline())
    if "error" in answer:
        raise SystemExit(f"{request['op']}: {answer['error']}")
    return answer.get("data")

release_r, release_w = os.pipe()
shells = []
for job in range(1, jobs + 1):
    shell = subprocess.Popen(["sh", "-c", f"read x <&{release_r}; cat /etc/hostname >/dev/null"],
                             pass_fds=[release_r])
    ask({"op": "track", "job": job, "pid": shell.pid, "uid": os.getuid(), "programs": ["cpu", "futex", "tcp", "shm", "file"]})
    shells.append(shell)
os.write(release_w, b"\n" * jobs)
for shell in shells:
    shell.wait()
# One tick of a node: every job's sample in one read (the exec service's way).
t0 = time.time()
every = ask({"op": "read", "job": 0, "jobs": list(range(1, jobs + 1)), "top": 8})
tick_ms = (time.time() - t0) * 1000
assert len(every) == jobs, f"{len(every)} of {jobs} jobs read"
maps = json.loads(subprocess.check_output(["bpftool", "map", "show", "-j"]))
ours = [m for m in maps if m.get("pids", [{}])[0].get("pid") == prof.pid] or \
       [m for m in maps if m["name"] in ("tracked", "cpu_stats", "futex_stats", "tcp_stats", "shm_stats", "file_stats",
                                          "dropped", "oncpu_since", "runq_since", "futex_since", "io_since",
                                          "shmget_args", "sysv_segments", "open_files", "socket_owner",
                                          "file_key_scratc", "path_scratch", "open_file_scrat")]
memlock = sum(m.get("bytes_memlock", 0) for m in ours)
with open(f"/proc/{prof.pid}/status") as status:
    rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
for job in range(1, jobs + 1):
    ask({"op": "untrack", "job": job})
prof.stdin.close()
prof.wait()
print(f"{jobs} profiled jobs on a node: maps {memlock / 1048576:.1f} MiB, "
      f"profiler resident {rss / 1024:.1f} MiB, one read of all of them {tick_ms:.0f} ms")
