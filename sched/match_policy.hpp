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
        low,        // lowest ids first at every level
        high,       // highest ids first at every level
        locality,   // the fewest, fullest-fitting subtrees first
        most_free,  // most cores free now first, later siblings first on a tie
    };
    std::string name = "pack";
    Order order = Order::low;
    bool node_exclusive = false;  // every node used is the job's alone, and all of it is allocated
    // Fluxion's low and high: each candidate is scored by its own id across
    // the whole subtree searched, so levels the jobspec leaves out (the
    // nodes of a bare slot) do not group the candidates.
    bool flatten = false;
    // Fluxion's slots: a slot lies at the first vertex with every type of
    // the slot directly beneath it (a slot of cores stays in one socket).
    // Banyan's `pack` lets a slot take its cores from all of a node's
    // sockets, so a task may have more cores than one socket holds.
    bool slot_at_holder = true;

    // pack (Banyan's), and Fluxion's first, low, high, lonode, hinode,
    // lonodex, hinodex, locality.
    // Error: EINVAL naming the policy and the known ones.
    static Result<MatchPolicy> from_name(std::string_view name);
    static const std::vector<std::string>& names();
};

}  // namespace banyan
