#include "sched/job_filter.hpp"

#include <cctype>
#include <map>

#include <fmt/format.h>

#include "core/text.hpp"

namespace banyan {

Result<JobFilter> parse_job_filter(std::string_view text) {
    static const std::map<std::string, std::vector<std::string>, std::less<>> groups = {
        {"pending", {"depend", "priority", "sched"}},
        {"running", {"run", "cleanup"}},
        {"active", {"depend", "priority", "sched", "run", "cleanup"}},
        {"inactive", {"inactive"}},
        {"depend", {"depend"}},
        {"priority", {"priority"}},
        {"sched", {"sched"}},
        {"run", {"run"}},
        {"cleanup", {"cleanup"}},
        {"completed", {"inactive"}},
        {"failed", {"inactive"}},
        {"canceled", {"inactive"}},
        {"timeout", {"inactive"}}};
    std::set<std::string> states;
    JobFilter filter;
    for (std::string name : split_commas(text)) {
        for (auto& c : name)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        auto it = groups.find(name);
        if (it == groups.end())
            return make_error(EINVAL, fmt::format("{}: expected pending, running, active, inactive, a state (depend, "
                                                  "priority, sched, run, cleanup) or a result (completed, failed, "
                                                  "canceled, timeout)",
                                                  name));
        states.insert(it->second.begin(), it->second.end());
        if (name == "completed" || name == "failed" || name == "canceled" || name == "timeout")
            filter.results.insert(name);
    }
    filter.states.assign(states.begin(), states.end());
    return filter;
}

}  // namespace banyan
