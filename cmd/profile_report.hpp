// The report `banyan job profile ID` prints (banyan-job(1)): a job's eBPF
// profile (doc/spec/profiling.md §3, §6) per node and per task rank.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace banyan {

// `profile`: job-manager.profile-get's answer. Input from the instance:
// read with the typed helpers, a field of another type shows as 0.
std::string profile_report(const std::string& job, const nlohmann::json& profile);

}  // namespace banyan
