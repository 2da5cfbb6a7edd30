#include "sched/match_policy.hpp"

#include <fmt/format.h>

namespace banyan {

const std::vector<std::string>& MatchPolicy::names() {
    static const std::vector<std::string> all{"pack",   "first",   "low",     "high",    "lonode",
                                              "hinode", "lonodex", "hinodex", "locality"};
    return all;
}

Result<MatchPolicy> MatchPolicy::from_name(std::string_view name) {
    using O = Order;
    // Fluxion's names (doc/spec/sched.md section 4), and Banyan's `pack`:
    // lonode's walk with slots that may span a node's sockets. `first` is Fluxion's
    // default: at each level the child with the most cores free now, the
    // later sibling on a tie, and the first fit is taken; a fresh graph is
    // thus walked from the highest ids, and jobs spread over the nodes.
    struct Entry {
        std::string_view name;
        O order;
        bool node_exclusive;
    };
    static constexpr Entry kPolicies[] = {
        {"pack", O::low, false},   {"first", O::most_free, false}, {"low", O::low, false},
        {"high", O::high, false},  {"lonode", O::low, false},      {"hinode", O::high, false},
        {"lonodex", O::low, true}, {"hinodex", O::high, true},     {"locality", O::locality, false},
    };
    for (const auto& e : kPolicies)
        if (e.name == name)
            return MatchPolicy{std::string(name), e.order, e.node_exclusive, name == "low" || name == "high",
                               name != "pack"};
    return make_error(EINVAL, fmt::format("unknown match policy '{}' (known: {})", name, fmt::join(names(), ", ")));
}

}  // namespace banyan
