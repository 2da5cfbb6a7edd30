// Matcher: places jobspecs on the resource pool (doc/spec/sched.md
// sections 4-5). A depth-first walk from the root visits only subtrees
// whose aggregates can still hold the request, in the order the policy
// prefers, and claims vertices until every count is met. Each match is
// for a time window [start, start + duration); the planner in every
// aggregate lets a job that does not fit now be reserved at the earliest
// time it does.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/result.hpp"
#include "resource/graph.hpp"
#include "resource/rv1.hpp"
#include "sched/jobspec.hpp"
#include "sched/match_policy.hpp"
#include "sched/resource_pool.hpp"

namespace banyan {

enum class MatchOp {
    allocate,                      // now or not at all
    allocate_orelse_reserve,       // now, or reserved at the earliest time it fits
    allocate_with_satisfiability,  // now; on failure, say whether it could ever fit
    satisfiability,                // could it ever fit (the pool empty, down resources left out)
};
Result<MatchOp> match_op_from_name(std::string_view name);

struct MatchResult {
    bool matched = false;
    bool reserved = false;       // matched for a later start
    bool unsatisfiable = false;  // can never fit (checked on failure, and by satisfiability)
    int64_t start = 0;
    int64_t end = 0;
    std::vector<Claim> claims;  // what the job holds; for satisfiability, what would fit
    uint64_t visits = 0;        // vertices looked at
    std::string reason;         // why it did not match, one line
};

class Matcher {
  public:
    Matcher(const ResourceGraph& graph, MatchPolicy policy);

    const ResourcePool& pool() const { return pool_; }
    ResourcePool& pool() { return pool_; }
    const MatchPolicy& policy() const { return policy_; }

    // Matches `jobspec` for job `jobid` at time `now` (seconds); a match is
    // recorded under jobid until cancel(). Error EEXIST: jobid already holds
    // resources.
    Result<MatchResult> match(const Jobspec& jobspec, MatchOp op, int64_t now, uint64_t jobid);
    // Gives back what job `jobid` holds or has reserved. Error ENOENT.
    Result<void> cancel(uint64_t jobid);
    // Gives back what job `jobid` holds on the nodes of `ranks` (a shrink).
    // Returns true when that was all it held with a rank: the job is then
    // cancelled whole. Error ENOENT.
    Result<bool> cancel_ranks(uint64_t jobid, const IdSet& ranks);
    // Whether `jobspec` could run here at all: it fits the whole graph
    // with nothing in use and every vertex up (drained and down nodes
    // return). Error ENOSPC, with the reason, when it never could.
    Result<void> could_ever_fit(const Jobspec& jobspec);
    // False when no core and no GPU is free at `now` (drained and down ones
    // count as free): then no job can start now, and a backfilling pass
    // stops looking. True when the graph has neither type.
    bool any_free(int64_t now) const;

    // Marks the node of each rank drained, down or up (ranks not named in
    // either set). Allocations on a node that goes down stay until
    // cancelled; nothing new is placed there.
    void set_node_states(const IdSet& drained, const IdSet& down);
    // Replaces the graph (a node came back with another shape, or joined)
    // and moves every allocation's claims to the vertices of the new graph
    // with the same rank, type and id (memory amounts and exclusive holds
    // kept). Drops reservations. Returns the jobs the new graph cannot hold
    // (their node shrank or is gone): they hold nothing now, and cancel() of them is
    // ENOENT.
    std::vector<uint64_t> reload(const ResourceGraph& graph);
    // R v1 of everything allocated now (reservations left out).
    Rv1 allocated() const;

    struct Job {
        std::vector<Claim> claims;
        int64_t start = 0;
        int64_t end = 0;
        bool reserved = false;
    };
    const Job* job(uint64_t jobid) const;
    const std::map<uint64_t, Job>& jobs() const { return jobs_; }
    // Moves a reservation that has come due to an allocation at `now`
    // (the queue calls it when a reserved job starts). Error ENOENT.
    Result<void> start_reserved(uint64_t jobid, int64_t now);

    // Records job `jobid` as holding exactly the cores and gpus of `r` over
    // [start, end), as when a scheduler restarts beside running jobs.
    // Error: ENOENT a rank or id the graph lacks; EBUSY something already in
    // use; EEXIST jobid already holds resources.
    Result<void> allocate_exact(uint64_t jobid, const Rv1& r, int64_t start, int64_t end);
    // Moves the end of a running job's allocation (a job past its expected
    // end still holds what it holds). Error ENOENT.
    Result<void> extend(uint64_t jobid, int64_t end);

    // R v1 of the shown claims: cores and gpus by rank, node names.
    Rv1 to_rv1(std::span<const Claim> claims, int64_t start, int64_t end) const;

  private:
    struct Request;
    struct Checkpoint {
        size_t claims;
        size_t exclusives;
    };

    // The ends of jobs after `after`, ascending: the only times a request
    // that does not fit now can start to fit.
    std::vector<int64_t> release_times(int64_t after) const;
    Result<std::vector<Request>> compile(const Jobspec& jobspec) const;
    // `ignore_use`: as if nothing were in use; `ignore_status`: as if every
    // vertex were up.
    bool try_at(const std::vector<Request>& requests, int64_t start, int64_t end, bool ignore_use,
                bool ignore_status = false);
    // `direct`: only among v's children, not deeper (a slot's members).
    bool match_request(uint32_t v, const Request& r, bool exclusive, bool direct = false);
    int64_t collect(uint32_t v, const Request& r, int64_t want, bool exclusive, bool direct = false);
    bool at_or_below_a_node(uint32_t v, const Request& slot) const;
    bool holds_slot_members(uint32_t v, const Request& slot) const;
    // Candidates below v in preorder, for the `flatten` policies (low,
    // high: vertices of r's type, or the vertices that hold a slot) and
    // the profile hint (the nodes that could hold a slot).
    enum class Candidates { of_type, slot_holders, nodes };
    void gather(uint32_t v, const Request& r, Candidates kind, std::vector<uint32_t>& out);
    // Claims the unclaimed vertices between u and v as shared parents.
    void claim_path(uint32_t u, uint32_t v);
    bool better_id(int64_t a, int64_t b) const;
    int64_t collect_in_order(uint32_t v, const Request& r, int64_t want, bool exclusive, bool direct);
    int64_t collect_by_id(uint32_t v, const Request& r, int64_t want, bool exclusive);
    // Whether the vertices of type t below v are all v's children, in
    // ascending id order (cached: the graph changes only by reload).
    bool children_in_id_order(uint32_t v, TypeId t);
    std::unordered_map<uint64_t, bool> in_id_order_;
    void collect_slots_by_score(uint32_t v, const Request& r, uint64_t want, std::vector<Checkpoint>& after);
    // -o profile=: network packs slots onto the fewest nodes; cpu and
    // memory spread them one per node in turn.
    void collect_slots_by_profile(uint32_t v, const Request& r, uint64_t want, std::vector<Checkpoint>& after);
    // Slots below v (or at it), each a checkpoint after it, until `want`.
    void collect_slots(uint32_t v, const Request& r, uint64_t want, std::vector<Checkpoint>& after);
    bool claim_unit(uint32_t u, const Request& r, bool exclusive);
    bool enter_node_exclusively(uint32_t u);
    bool may_hold(uint32_t v, std::span<const std::pair<TypeId, int64_t>> needs) const;
    void hold_exclusive_subtrees();
    template <class Visit>
    void for_each_child(uint32_t v, TypeId t, int64_t want, Visit&& visit);
    void next_epoch();
    void push_claim(const Claim& c);
    Checkpoint checkpoint() const { return {claims_.size(), exclusives_.size()}; }
    void rollback(Checkpoint cp);

    // The job's constraint (RFC 31) and profile hint for one match.
    struct ConstraintScope {
        ConstraintScope(Matcher& m, const Jobspec& js) : matcher(m) {
            matcher.constraint_ = js.constraint ? &*js.constraint : nullptr;
            matcher.eligible_now_ = nullptr;
            matcher.profile_ = js.profile;
        }
        ~ConstraintScope() {
            matcher.constraint_ = nullptr;
            matcher.eligible_now_ = nullptr;
            matcher.profile_ = Profile::none;
        }
        ConstraintScope(const ConstraintScope&) = delete;
        ConstraintScope& operator=(const ConstraintScope&) = delete;
        Matcher& matcher;
    };
    // Up (unless status is ignored), and a node that meets the constraint.
    bool usable(uint32_t u) const;
    // With a constraint: v's children with a node that meets it at or
    // below them, as a bitmap by position (cached per constraint until
    // the graph changes); nullptr without one, or where v keeps none.
    using Eligible = std::unordered_map<uint32_t, std::vector<uint64_t>>;
    const std::vector<uint64_t>* eligible_children(uint32_t v);
    const Eligible& eligible_for(const Constraint& constraint);
    std::unordered_map<std::string, Eligible> eligible_;
    const Eligible* eligible_now_ = nullptr;  // this match's, once looked up
    bool node_satisfies(uint32_t node, const Constraint& c) const;
    // Why a request can never fit: the constraint's term no node meets.
    std::string unsatisfiable_reason() const;
    std::string slot_shortfall(const std::vector<Request>& requests) const;

    ResourcePool pool_;
    MatchPolicy policy_;
    const Constraint* constraint_ = nullptr;
    Profile profile_ = Profile::none;  // the job's -o profile= hint
    std::optional<TypeId> node_type_;
    std::optional<TypeId> core_type_;
    // `first` only: the order weight of each vertex among its siblings.
    static constexpr uint64_t kUntouched = UINT64_MAX;
    std::vector<uint64_t> first_weight_;
    void update_first_weights(std::span<const Claim> claims);
    std::map<uint64_t, Job> jobs_;
    std::multiset<int64_t> ends_;  // every job's end, for release_times()

    // State of the match in progress.
    int64_t start_ = 0, end_ = 0, now_ = 0;
    bool ignore_use_ = false;
    bool ignore_status_ = false;
    uint32_t epoch_ = 0;
    std::vector<uint32_t> marked_;  // epoch: the vertex has a claim in this match
    std::vector<uint32_t> taken_;   // epoch: claimed as a unit; no other request may use it
    std::vector<uint32_t> claim_of_;
    std::vector<Claim> claims_;
    std::vector<std::pair<uint32_t, bool>> exclusives_;  // vertex, show what it holds
    uint64_t visits_ = 0;
};

}  // namespace banyan
