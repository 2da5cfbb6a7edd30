// JobProfiles: rank 0's part of the eBPF job profiles (doc/spec/
// profiling.md §1, §6): the request read from a jobspec and checked
// against the site's policy, and, while jobs run, each rank's latest
// counters and a series of job-wide totals, in memory (the last counters
// and the series go to the job database).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "core/jobid.hpp"
#include "core/result.hpp"

namespace banyan {

// attributes.system.ebpf as exec.run passes it on ({programs, interval,
// optional}, checked); null when the job asks for none. Error: one line
// naming the field.
Result<std::shared_ptr<const nlohmann::json>> read_ebpf_request(const nlohmann::json& system);

// [profiling] of banyan.toml, and whether this instance can load programs.
struct ProfilingPolicy {
    bool enabled = true;
    std::vector<uint32_t> users;       // empty: anyone
    std::vector<std::string> queues;  // empty: any queue
    std::string cannot;                      // why no node can profile ("": they can)
    static Result<ProfilingPolicy> from_config(const Config& config);
    // Why the job may not be profiled ("": it may).
    std::string refused(const nlohmann::json& ebpf, uint32_t userid, const std::string& queue) const;
};

// The job-wide sums a sample adds to (the series, /metrics).
struct ProfileTotals {
    double oncpu = 0, runq = 0, futex_wait = 0, file_time = 0;
    uint64_t tcp_sent = 0, tcp_received = 0, file_read = 0, file_written = 0;
    nlohmann::json to_json() const;
    // One node's counters (profiling.md §3), summed.
    static ProfileTotals of(const nlohmann::json& node);
    void add(const ProfileTotals& other, int sign);
};

class JobProfiles {
  public:
    static constexpr size_t kMaxSeries = 720;
    struct Live {
        double interval = 10;
        std::map<uint32_t, nlohmann::json> ranks;       // each rank's latest counters
        std::map<uint32_t, ProfileTotals> rank_totals;  // ... and what they add up to
        std::set<uint32_t> final_ranks;
        std::deque<std::pair<double, ProfileTotals>> series;
        ProfileTotals sum;  // of every rank's latest, kept as samples come
        ProfileTotals totals() const;
    };
    // A rank's counters at `time` (wall clock).
    void add(JobId id, double interval, uint32_t rank, double time, nlohmann::json data, bool final);
    const Live* find(JobId id) const;
    void forget(JobId id) { live_.erase(id); }
    const std::map<JobId, Live>& live() const { return live_; }
    static nlohmann::json series_json(const Live& live);

  private:
    std::map<JobId, Live> live_;
};

}  // namespace banyan
