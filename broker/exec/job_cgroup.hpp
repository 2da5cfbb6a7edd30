// JobCgroup: a cgroup of the unified (v2) hierarchy that holds one shell
// and everything it starts, so that nothing of a job survives it even when
// the shell itself is gone (doc/spec/shell.md section 1). Process tracking
// needs no controller: it works on a pure v2 machine and on the unified
// mount of a hybrid v1 one. A job's memory limit (--mem) is set in it
// where the memory controller is enabled for it, else in a second
// JobCgroup in the v1 memory hierarchy, which its shell joins before it
// executes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

#include "core/result.hpp"

namespace banyan {

// Where this process's cgroup lies in the unified hierarchy, from the text
// of /proc/self/mounts and /proc/self/cgroup: "/sys/fs/cgroup/unified/x".
// nullopt when no cgroup2 file system is mounted.
std::optional<std::string> own_unified_cgroup(const std::string& mounts, const std::string& proc_self_cgroup);
// The same in the v1 hierarchy of the memory controller:
// "/sys/fs/cgroup/memory/x"; nullopt when memory is on no v1 mount.
std::optional<std::string> own_v1_memory_cgroup(const std::string& mounts, const std::string& proc_self_cgroup);

// Whether `name` is one that ExecService::cgroup_name() gives job `jobid`
// (its f58 form) on rank `rank`: "banyan-RANK-PID-JOBID.LAUNCH", PID and
// LAUNCH decimal (any broker's PID: the one that made it ran before).
bool is_job_cgroup_name(std::string_view name, uint32_t rank, std::string_view jobid);

class JobCgroup {
  public:
    // Creates `dir` and opens it. Error when it cannot be created
    // (read-only, no v2) or exists already.
    static Result<JobCgroup> create(std::string dir);
    // Opens `dir`, a job's cgroup an earlier broker made (its shell is
    // re-attached, doc/spec/shell.md §8). Error when it cannot be opened.
    static Result<JobCgroup> open_existing(std::string dir);
    JobCgroup(JobCgroup&& other) noexcept : dir_(std::move(other.dir_)), fd_(other.fd_) {
        other.dir_.clear();
        other.fd_ = -1;
    }
    JobCgroup& operator=(JobCgroup&&) = delete;
    // Kills what is left and tries once to remove the directory (never
    // waits: the caller retries with try_remove() where processes linger).
    ~JobCgroup();

    // The open directory, for starting a process in it
    // (SpawnOptions::cgroup_fd).
    int fd() const { return fd_; }
    // SIGKILL to every process in it (cgroup.kill, or one by one on kernels
    // before 5.14); true when it is empty afterwards.
    bool kill_all();
    // kill_all(), then removes the directory if that emptied it; true once
    // removed (then destruction does nothing).
    bool try_remove();
    const std::string& dir() const { return dir_; }
    // Leaves the cgroup and what runs in it as they are: destruction no
    // longer removes it (a broker that stops keeping its jobs).
    void keep() { dir_.clear(); }

    // Limits what its processes use to `bytes`: memory.max (v2), or
    // memory.limit_in_bytes and, where swap is counted, the same for
    // memory and swap together (v1); no swap beyond it either way. Error when it has no such file (the
    // controller is not enabled here) or the kernel refuses the value.
    Result<void> limit_memory(uint64_t bytes);
    // The limit set in it (memory.max, or memory.limit_in_bytes); nullopt
    // where none is set or neither file exists.
    std::optional<uint64_t> memory_limit() const;
    // How many processes in it the kernel killed for want of memory
    // (oom_kill of memory.events, v2, or of memory.oom_control, v1); 0
    // where neither file says.
    uint64_t oom_kills() const;

  private:
    JobCgroup(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}
    std::string dir_;
    int fd_ = -1;
};

}  // namespace banyan
