// The job filter of `banyan jobs -f` and of GET /api/v1/jobs?filter=:
// comma-separated names, each a group (pending, running, active,
// inactive), a state or a result (completed, failed, canceled, timeout).
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace banyan {

struct JobFilter {
    std::vector<std::string> states;  // for job-manager.list's `states`
    std::set<std::string> results;    // inactive jobs kept only with one of these (empty: all)
};

// Error: "NAME: expected pending, running, ...", naming the first unknown name.
Result<JobFilter> parse_job_filter(std::string_view text);

}  // namespace banyan
