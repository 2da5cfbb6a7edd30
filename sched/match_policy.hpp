// MatchPolicy: which of the fitting resources a match prefers
// (doc/spec/sched.md section 4), chosen by name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace banyan {

struct MatchPolicy {
    enum class Order {
        low,       // lowest ids first at every level
        high,      // highest ids first at every level
        locality,  // the fewest, fullest-fitting subtrees first
    };
    std::string name = "first";
    Order order = Order::low;
    bool node_exclusive = false;  // every node used is the job's alone, and all of it is allocated

    // first, low, high, lonode, hinode, lonodex, hinodex, locality.
    // Error: EINVAL naming the policy and the known ones.
    static Result<MatchPolicy> from_name(std::string_view name);
    static const std::vector<std::string>& names();
};

}  // namespace banyan
