// NodeEligibility: a job's constraint (RFC 31) as the matcher's walk uses
// it. Nodes are checked one by one as the walk enters them; above the
// nodes, for the vertices that keep free-children bitmaps, a bitmap of the
// children with a node below them that meets the constraint lets the walk
// skip whole racks. The bitmaps are made once per constraint and kept
// until the graph changes (clear()).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "sched/constraint.hpp"
#include "sched/resource_pool.hpp"

namespace banyan {

class NodeEligibility {
  public:
    // `pool` must outlive this; clear() after it changes.
    explicit NodeEligibility(const ResourcePool& pool);

    // The constraint of the match about to run; nullptr: none. It must stay
    // alive until the next begin().
    void begin(const Constraint* constraint);
    const Constraint* constraint() const { return constraint_; }

    // Whether `node` (a node vertex) meets the match's constraint; true
    // without one.
    bool meets(uint32_t node) const { return !constraint_ || node_meets(node, *constraint_); }
    // v's children with a node that meets the constraint at or below them,
    // as a bitmap by position; nullptr without a constraint, or where v
    // keeps no bitmap (its children are then checked one by one).
    const std::vector<uint64_t>* children(uint32_t v);
    // Why a request can never fit, one line: the constraint's term that no
    // node meets, or how many nodes meet it.
    std::string unsatisfiable_reason() const;
    // The graph changed: drops every bitmap.
    void clear();

  private:
    using Bitmaps = std::unordered_map<uint32_t, std::vector<uint64_t>>;
    bool node_meets(uint32_t node, const Constraint& c) const;
    const Bitmaps& bitmaps_for(const Constraint& c);

    const ResourcePool& pool_;
    const Constraint* constraint_ = nullptr;
    const Bitmaps* current_ = nullptr;                // this match's, once looked up
    std::unordered_map<std::string, Bitmaps> cache_;  // by the constraint's JSON
};

}  // namespace banyan
