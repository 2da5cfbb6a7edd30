// BpfProfiles: the five profile programs of profile.bpf.c, loaded once in
// banyan-profiler and shared by the node's profiled jobs
// (doc/spec/profiling.md). A program is attached while at least one job
// asks for it, so a node with no profiled job pays nothing; a job's
// counters are read and removed by its id.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/types.h>

#include "core/result.hpp"

struct profile;  // the skeleton bpftool made (profile.skel.h)
struct bpf_link;

namespace banyan {

// The programs, in the bit order of profile_maps.h.
inline constexpr std::array<const char*, 5> kProfilePrograms{"cpu", "futex", "tcp", "shm", "file"};

class BpfProfiles {
  public:
    // Loads every program the kernel takes (each checked on its own, so one
    // the kernel refuses names itself and leaves the others usable).
    // Error: the kernel has no BTF, or none of them loads.
    static Result<std::unique_ptr<BpfProfiles>> load();
    ~BpfProfiles();

    // Why a program is not loaded (empty: it is).
    const std::string& refused(size_t program) const { return refused_[program]; }

    // Counts the job `job` from its shell `shell_pid` on: every process
    // the shell forks from now on, and theirs. `programs`: a bit mask.
    // `uid`: the job's user; a process of the job running as another (a
    // setuid program) is not counted.
    Result<void> track(uint64_t job, pid_t shell_pid, unsigned programs, uint32_t uid);
    // The tasks the shell started: their pids (the roots of their
    // subtrees) and ranks.
    void name_tasks(uint64_t job, const std::vector<std::pair<pid_t, uint32_t>>& tasks);
    // The counters so far (doc/spec/profiling.md §3) of each job of
    // `jobs` profiled here, with at most `top` entries in each list.
    std::map<uint64_t, nlohmann::json> read(const std::set<uint64_t>& jobs, size_t top) const;
    // The job's counters, and nothing of it left in the maps.
    nlohmann::json untrack(uint64_t job);
    bool tracking(uint64_t job) const { return jobs_.count(job) > 0; }
    // Detaches the programs no job has asked for in `idle`. Not at once:
    // each detach waits for an RCU grace period (~45 ms a program, ~1.8 s
    // for all five on the test machine), which a job's end must not.
    void detach_idle(std::chrono::seconds idle);

  private:
    BpfProfiles() = default;
    Result<void> attach(size_t group);
    void detach(size_t group);
    void remove_entries(uint64_t job);

    struct Job {
        unsigned programs = 0;
        pid_t shell = 0;
        std::map<uint32_t, uint32_t> rank_of;  // root pid -> rank
    };
    profile* skel_ = nullptr;
    std::array<std::string, 5> refused_;
    // Per group (the five, then the process tree): its links while attached.
    std::array<std::vector<bpf_link*>, 6> links_;
    std::array<int, 6> users_{};
    std::array<std::chrono::steady_clock::time_point, 6> unused_since_{};
    std::map<uint64_t, Job> jobs_;
};

}  // namespace banyan
