// MatchPolicy: which of the fitting resources a match prefers
// (doc/spec/sched.md section 4). The matcher's walk (matcher.hpp) is the
// same for every policy; at each vertex it asks the policy in which order
// to try the children, and it reads three traits that shape the walk.
// A policy may keep state of its own about the graph (`first` weighs the
// vertices by what the jobs before took), so each matcher has its own,
// made by create().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/function_ref.hpp"
#include "core/result.hpp"
#include "sched/resource_pool.hpp"

namespace banyan {

// The children of one vertex that the walk is about to try.
struct Siblings {
    const ResourcePool& pool;
    uint32_t parent;                 // kNoVertex: the roots
    std::span<const uint32_t> kids;  // pool.children(parent), or pool.roots()
    TypeId type;                     // what the walk looks for below them
    int64_t want;                    // how much of it is still wanted
    int64_t start, end;              // the window matched
    bool ignore_use;                 // as if nothing were in use
    // When the window starts now and use counts, and the parent keeps one:
    // its children with something of `type` free now (bitmap by position);
    // else empty.
    std::span<const uint64_t> free_now;
    const std::vector<uint64_t>* eligible;  // with a constraint, the kids that may be tried (bitmap); else null
};

// Called with each child in turn; false stops the walk through them.
using VisitChild = FunctionRef<bool(uint32_t)>;

class MatchPolicy {
  public:
    // What shapes the walk besides the order of children.
    struct Traits {
        // Every node used is the job's alone, and all of it is allocated.
        bool node_exclusive = false;
        // Fluxion's low and high: each candidate is scored by its own id
        // across the whole subtree searched (by_id_before()), so levels the
        // jobspec leaves out (the nodes of a bare slot) do not group them.
        bool scores_by_id = false;
        // Fluxion's slots: a slot lies at the first vertex with every type
        // of the slot directly beneath it (a slot of cores stays in one
        // socket). Banyan's `pack` lets a slot take its cores from all of a
        // node's sockets, so a task may have more cores than one socket holds.
        bool slot_at_holder = true;
    };

    virtual ~MatchPolicy() = default;
    MatchPolicy(const MatchPolicy&) = delete;
    MatchPolicy& operator=(const MatchPolicy&) = delete;

    // pack (Banyan's), and Fluxion's first, low, high, lonode, hinode,
    // lonodex, hinodex, locality. Error: EINVAL naming the policy and the
    // known ones.
    static Result<std::unique_ptr<MatchPolicy>> create(std::string_view name);
    static const std::vector<std::string>& names();

    const std::string& name() const { return name_; }
    const Traits& traits() const { return traits_; }

    // Offers the siblings to `visit` in the order this policy prefers, until
    // it returns false.
    virtual void visit_in_order(const Siblings& s, VisitChild visit) const = 0;
    // For scores_by_id: whether a candidate scored `a` comes before one
    // scored `b`.
    virtual bool by_id_before(int64_t a, int64_t b) const { return a < b; }
    // A job was matched `claims`, to start now or reserved for later.
    virtual void matched(const ResourcePool& pool, std::span<const Claim> claims) {
        (void)pool;
        (void)claims;
    }
    // The matcher's graph was replaced by `pool`.
    virtual void graph_changed(const ResourcePool& pool) { (void)pool; }

  protected:
    MatchPolicy(std::string_view name, Traits traits) : name_(name), traits_(traits) {}

  private:
    std::string name_;
    Traits traits_;
};

}  // namespace banyan
