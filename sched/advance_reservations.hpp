// AdvanceReservations: an admin's reservations of whole nodes for a window
// of time (doc/spec/reservations.md, sched.md section 10). Each is in the
// pool's planners as every vertex of its nodes fully in use over
// [start, end), so jobs plan around it as around any other use: one that
// ends before it starts may run there, no other. A job that runs in a
// reservation is matched with that reservation lifted out of the planners,
// and while a job holds part of a reservation's nodes in its window (one
// that runs in it, or ran there before it) the reservation plans that
// part as not its own (a carve-out): the nodes count as in use once, not
// twice, also in the aggregates above them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/idset.hpp"
#include "core/result.hpp"
#include "sched/allocation_table.hpp"
#include "sched/constraint.hpp"
#include "sched/jobspec.hpp"
#include "sched/resource_pool.hpp"

namespace banyan {

struct AdvanceReservation {
    std::string name;
    int64_t start = 0;
    int64_t end = 0;
    IdSet ranks;
};

class AdvanceReservations {
  public:
    // Both must outlive this; reapply() after the pool is replaced. The
    // table's allocations that name a reservation are its carve-outs.
    AdvanceReservations(ResourcePool& pool, const AllocationTable& table) : pool_(pool), table_(table) {}
    AdvanceReservations(const AdvanceReservations&) = delete;
    AdvanceReservations& operator=(const AdvanceReservations&) = delete;

    // Which nodes a new reservation asks for (reservations.md §3): those of
    // `ranks`; or `count` of the nodes that meet `constraint` (every node
    // without one), up and with nothing in use or planned over the window;
    // or, without a count, every node that meets it.
    struct Selection {
        std::optional<IdSet> ranks;
        size_t count = 0;
        std::optional<Constraint> constraint;
    };
    // The ranks of the nodes chosen for [start, end). Error: ENOENT a rank
    // the graph lacks; ENOSPC too few free nodes, or none meet the
    // constraint.
    Result<IdSet> choose(const Selection& selection, int64_t start, int64_t end) const;
    // Records one and plans its nodes as in use over its window, but for
    // what allocations that name it hold (restored before it). Error:
    // EEXIST its name; ENOENT a rank the graph lacks; EBUSY a node of it is
    // in another reservation whose window meets its own (named).
    Result<void> add(AdvanceReservation reservation);
    // Takes one out of the planners and forgets it; the jobs running in it
    // are ordinary allocations from then on. Error ENOENT.
    Result<void> remove(const std::string& name);
    // The table now holds job `jobid`'s allocation on nodes of reservations
    // over their windows (a job that runs in one, a running job restored,
    // one that overran into one): each of them gives up what it holds
    // there. Ordinary matches never meet a reservation: the planners keep
    // them out.
    void carve(uint64_t jobid);
    // Before the allocation `a` of job `jobid` leaves the table (or
    // changes): each reservation that gave it room plans that as its own
    // again.
    void uncarve(uint64_t jobid, const Allocation& a);
    const AdvanceReservation* find(const std::string& name) const;
    // A jobspec that names a reservation may run only on its nodes: its
    // constraint gets the reservation's ranks ANDed in. Error ENOENT: no
    // such reservation.
    Result<void> confine(Jobspec& jobspec) const;
    bool empty() const { return held_.empty(); }
    size_t size() const { return held_.size(); }
    // The ends of reservations after `after`: times at which a job that
    // does not fit now may start to fit (added to `times`).
    void add_ends_after(int64_t after, std::vector<int64_t>& times) const;
    // The reservation, earliest start first, whose window meets
    // [start, end); null when none does.
    const AdvanceReservation* first_meeting(int64_t start, int64_t end) const;

    // Takes one reservation (or, with none named, every one) out of the
    // planners until the Lift is destroyed: the match of a job that runs
    // in it, or the question whether a blocked job waits for one.
    class Lift {
      public:
        Lift(const Lift&) = delete;
        Lift& operator=(const Lift&) = delete;
        ~Lift();

      private:
        friend class AdvanceReservations;
        Lift(AdvanceReservations& owner, std::optional<std::string> name);
        AdvanceReservations& owner_;
        std::optional<std::string> name_;  // none: all
    };
    Lift lift(const std::string& name) { return Lift(*this, name); }
    Lift lift_all() { return Lift(*this, std::nullopt); }

    // After the pool was replaced (a new graph): each planned again on the
    // nodes of its ranks there (a rank that is gone holds nothing).
    void reapply();

  private:
    struct Held {
        AdvanceReservation reservation;
        std::vector<uint32_t> nodes;  // node vertices of its ranks
        std::set<uint64_t> jobs;  // its carve-outs: jobs that hold part of its nodes in its window
    };
    // What of `a` is on the reservation's nodes, when their windows meet.
    std::vector<Claim> inside(const Held& held, const Allocation& a) const;
    // A job's carve-out: those claims over its window within the reservation's.
    void apply_carve(const Held& held, const Allocation& a, int sign);
    // The reservation whose window meets [start, end) on `node`, or null.
    const AdvanceReservation* first_meeting_on(uint32_t node, int64_t start, int64_t end) const;
    // The node vertices of `ranks` (a rank the graph lacks: none).
    std::vector<uint32_t> nodes_of(const IdSet& ranks) const;
    // The reservation's planned use less its carve-outs, times `sign`.
    void apply(const Held& held, int sign);
    // Applies `sign` to the one named, or to all.
    void apply_named(const std::optional<std::string>& name, int sign);

    ResourcePool& pool_;
    const AllocationTable& table_;
    std::map<std::string, Held> held_;
};

}  // namespace banyan
