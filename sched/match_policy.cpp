#include "sched/match_policy.hpp"

#include <fmt/format.h>

namespace banyan {

const std::vector<std::string>& MatchPolicy::names() {
    static const std::vector<std::string> all{"first",   "low",     "high",    "lonode",
                                              "hinode",  "lonodex", "hinodex", "locality"};
    return all;
}

Result<MatchPolicy> MatchPolicy::from_name(std::string_view name) {
    using O = Order;
    // The matcher descends level by level in id order, so preferring low
    // node ids first (lonode) is the same walk as preferring low ids at
    // every level (low); `first` is that walk too and stops at the first fit
    // like every policy here does.
    struct Entry {
        std::string_view name;
        O order;
        bool node_exclusive;
    };
    static constexpr Entry kPolicies[] = {
        {"first", O::low, false},   {"low", O::low, false},      {"high", O::high, false},
        {"lonode", O::low, false},  {"hinode", O::high, false},  {"lonodex", O::low, true},
        {"hinodex", O::high, true}, {"locality", O::locality, false},
    };
    for (const auto& e : kPolicies)
        if (e.name == name)
            return MatchPolicy{std::string(name), e.order, e.node_exclusive};
    return make_error(EINVAL, fmt::format("unknown match policy '{}' (known: {})", name, fmt::join(names(), ", ")));
}

}  // namespace banyan
