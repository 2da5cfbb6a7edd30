// Cgroup limits of this process: how many cores and how much memory it may
// really use (doc/spec/resources.md section 2). Reads cgroup v2, or v1 as a
// fallback, from text the caller supplies, so tests run on fixtures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace banyan {

struct CgroupLimits {
    std::optional<uint32_t> max_cores;   // floor(quota/period), at least 1
    std::optional<uint64_t> max_memory;  // bytes
    std::string version;                 // "v2", "v1" or "none"
};

// `proc_self_cgroup`: the text of /proc/self/cgroup; `root`: where the
// cgroup file systems are mounted (/sys/fs/cgroup). Limits set on any
// ancestor count; the smallest wins. Unreadable files mean no limit.
CgroupLimits read_cgroup_limits(const std::string& proc_self_cgroup, const std::string& root);

// The limits of this process on this machine.
CgroupLimits read_own_cgroup_limits();

}  // namespace banyan
