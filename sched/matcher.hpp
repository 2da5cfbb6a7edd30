// Matcher: places jobspecs on the resource pool (doc/spec/sched.md
// sections 4-5). A depth-first walk from the root visits only subtrees
// whose aggregates can still hold the request, in the order the policy
// prefers, and claims vertices until every count is met. Each match is
// for a time window [start, start + duration); the planner in every
// aggregate lets a job that does not fit now be reserved at the earliest
// time it does.
//
// The parts, a file each: the operations on jobs and R output
// (matcher.cpp), the walk (matcher_walk.cpp), what each job holds
// (allocation_table), the policies' orders (match_policy) and the job's
// constraint as the walk uses it (node_eligibility).
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
#include "sched/advance_reservations.hpp"
#include "sched/allocation_table.hpp"
#include "sched/jobspec.hpp"
#include "sched/match_policy.hpp"
#include "sched/node_eligibility.hpp"
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
    Matcher(const ResourceGraph& graph, std::unique_ptr<MatchPolicy> policy);
    // The table and the eligibility cache refer to the pool in place.
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;

    // Whether the slots of one job may take from the same pool (a memory
    // vertex, with an amount), each what it asks: the live scheduler's,
    // where Banyan's graphs have one memory pool per socket. Off, as in
    // Fluxion (and banyan-sched-query), a match takes each vertex once,
    // and a slot's member takes the whole of it (Fluxion's granules).
    void share_pools(bool on) { share_pools_ = on; }

    const ResourcePool& pool() const { return pool_; }
    ResourcePool& pool() { return pool_; }
    const MatchPolicy& policy() const { return *policy_; }
    // Admins' reservations of nodes for a window (sched.md §10): in the
    // planners, kept over reload().
    AdvanceReservations& reservations() { return reservations_; }
    const AdvanceReservations& reservations() const { return reservations_; }

    // Matches `jobspec` for job `jobid` at time `now` (seconds); a match is
    // recorded under jobid until cancel(). Error EEXIST: jobid already holds
    // resources.
    // A jobspec that names an advance reservation is matched only once the
    // reservation has begun, only on its nodes (SchedQueue::submit
    // constrains it), with the reservation lifted, and only now (`op` is
    // taken as allocate).
    Result<MatchResult> match(const Jobspec& jobspec, MatchOp op, int64_t now, uint64_t jobid);
    // Whether `jobspec` would start now (in its reservation, if it names
    // one), recording nothing: no allocation, and the policy's state left
    // as it was (what-if questions: preemption, a blocked job's reason).
    bool fits_now(const Jobspec& jobspec, int64_t now);
    // The end of the jobspec's window if it starts at `start`: its
    // duration later, or never (kForever).
    static int64_t window_end(const Jobspec& jobspec, int64_t start);
    // Gives back what job `jobid` holds or has reserved. Error ENOENT.
    Result<void> cancel(uint64_t jobid);
    // Puts an allocation cancel() took out back as it was (what-if tests:
    // preemption, sched.md §9). Error EEXIST: the id holds resources.
    Result<void> put_back(uint64_t jobid, Allocation allocation);
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
    // kept), and each advance reservation to the nodes of its ranks. Drops
    // the reservations of pending jobs. Returns the jobs the new graph cannot hold
    // (their node shrank or is gone): they hold nothing now, and cancel() of them is
    // ENOENT.
    std::vector<uint64_t> reload(const ResourceGraph& graph);
    // R v1 of everything allocated now (reservations left out).
    Rv1 allocated() const;

    using Job = Allocation;
    const Job* job(uint64_t jobid) const { return table_.find(jobid); }
    const std::map<uint64_t, Job>& jobs() const { return table_.all(); }
    // Moves a reservation that has come due to an allocation at `now`
    // (the queue calls it when a reserved job starts). Error ENOENT.
    Result<void> start_reserved(uint64_t jobid, int64_t now) { return table_.start_reserved(jobid, now); }

    // Records job `jobid` as holding exactly the cores and gpus of `r` over
    // [start, end), and each rank's memory from its memory pools in order,
    // as when a scheduler restarts beside running jobs, whatever advance
    // reservation it meets (each is carved out: AdvanceReservations).
    // Error: ENOENT a rank or id the graph lacks; EBUSY something already in
    // use; EEXIST jobid already holds resources.
    Result<void> allocate_exact(uint64_t jobid, const Rv1& r, int64_t start, int64_t end);
    // Moves the end of a running job's allocation (a job past its expected
    // end still holds what it holds). Error ENOENT.
    Result<void> extend(uint64_t jobid, int64_t end);

    // R v1 of the shown claims: cores and gpus by rank, node names, and
    // with `memory` the memory claimed on each rank in bytes (the live
    // scheduler's R; Fluxion's has none).
    enum class RMemory { left_out, written };
    Rv1 to_rv1(std::span<const Claim> claims, int64_t start, int64_t end,
               RMemory memory = RMemory::left_out) const;

  private:
    // The walk (matcher_walk.cpp): a depth-first search below the roots
    // that claims vertices for each request of the jobspec, in the order
    // the policy gives, into claims_; a checkpoint and rollback() undo what
    // a failed branch claimed.
    static constexpr int64_t kHuge = kForever;
    using Needs = std::vector<std::pair<TypeId, int64_t>>;
    // One resource of the jobspec, resolved against the pool's types.
    struct Request {
        TypeId type = 0;
        bool slot = false;
        bool leaf = false;       // a leaf type (core, gpu, memory): the count is an amount
        bool exclusive = false;  // `exclusive: true` in the jobspec
        JobspecCount count;
        std::vector<Request> with;
        TypeId scan_type = 0;  // children without this type free now are skipped
        Needs unit_needs;      // what one unit needs in the subtree that holds it
        Needs needs;           // what all of it needs, at its smallest count
    };
    struct Checkpoint {
        size_t claims;
        size_t exclusives;
    };

    struct JobScope;  // the constraint and profile hint of the job matched
    Result<MatchResult> match_here(const Jobspec& jobspec, MatchOp op, int64_t now, uint64_t jobid);
    bool fits_here(const Jobspec& jobspec, int64_t now);
    Result<MatchResult> match_in_reservation(const Jobspec& jobspec, int64_t now, uint64_t jobid);
    Result<void> allocate_exact_here(uint64_t jobid, const Rv1& r, int64_t start, int64_t end);
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
    // Candidates below v in preorder, for the policies that score by id
    // (vertices of r's type, or the vertices that hold a slot) and the
    // profile hint (the nodes that could hold a slot).
    enum class Candidates { of_type, slot_holders, nodes };
    void gather(uint32_t v, const Request& r, Candidates kind, std::vector<uint32_t>& out);
    // Claims the unclaimed vertices between u and v as shared parents.
    void claim_path(uint32_t u, uint32_t v);
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
    // The children of v (the roots for kNoVertex) that may hold `want` of
    // type t, in the policy's order, until `visit` returns false.
    void for_each_child(uint32_t v, TypeId t, int64_t want, VisitChild visit);
    void next_epoch();
    void push_claim(const Claim& c);
    // Takes up to `want` of leaf pool u for r; what it took (0: nothing,
    // or u already claimed in this match and pools are not shared).
    // Up to `want` of pool vertex u's free amount; `whole`: all of it (a
    // slot's member under Fluxion's policies, pools not shared: as its
    // dom_slot, a slot takes whole vertices, however little it asks).
    int64_t take_from_pool(uint32_t u, const Request& r, int64_t want, bool exclusive, bool whole = false);
    // u is claimed as a unit in this match and r may not take from it too.
    bool taken_for(uint32_t u, const Request& r) const {
        return taken_[u] == epoch_ && !(share_pools_ && r.leaf && pool_.type(u) == r.type);
    }
    // What this match has claimed of u so far.
    int64_t claimed_here(uint32_t u) const;
    Checkpoint checkpoint() const { return {claims_.size(), exclusives_.size()}; }
    void rollback(Checkpoint cp);
    // Up (unless status is ignored), and a node that meets the constraint.
    bool usable(uint32_t u) const;
    bool is_node(uint32_t u) const { return node_type_ && pool_.type(u) == *node_type_; }
    std::string slot_shortfall(const std::vector<Request>& requests) const;

    ResourcePool pool_;
    AllocationTable table_{pool_};
    AdvanceReservations reservations_{pool_, table_};
    std::unique_ptr<MatchPolicy> policy_;
    NodeEligibility eligibility_{pool_};
    std::optional<TypeId> node_type_;
    std::optional<TypeId> core_type_;

    // State of the match in progress.
    Profile profile_ = Profile::none;  // the job's -o profile= hint
    int64_t start_ = 0, end_ = 0, now_ = 0;
    bool ignore_use_ = false;
    bool ignore_status_ = false;
    uint32_t epoch_ = 0;
    std::vector<uint32_t> marked_;  // epoch: the vertex has a claim in this match
    std::vector<uint32_t> taken_;   // epoch: claimed as a unit; no other request may use it
    std::vector<uint32_t> claim_of_;
    // By claim: the vertex's earlier claim in this match (a pool that
    // slots share, share_pools), or kNoClaim.
    static constexpr uint32_t kNoClaim = UINT32_MAX;
    std::vector<uint32_t> prior_claim_;
    bool share_pools_ = false;
    std::vector<Claim> claims_;
    std::vector<std::pair<uint32_t, bool>> exclusives_;  // vertex, show what it holds
    uint64_t visits_ = 0;
};

}  // namespace banyan
