// AllocationTable: what each job holds, or has reserved for a later start,
// on a ResourcePool, and when it ends. Every change here is applied to the
// pool's planners at once, so the table and the pool never disagree.
// The matcher finds the claims; this keeps them.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "core/idset.hpp"
#include "core/result.hpp"
#include "sched/resource_pool.hpp"

namespace banyan {

struct Allocation {
    std::vector<Claim> claims;
    int64_t start = 0;
    int64_t end = 0;
    bool reserved = false;  // for a later start: in the planners, not in use now
};

class AllocationTable {
  public:
    // `pool` must outlive this.
    explicit AllocationTable(ResourcePool& pool) : pool_(pool) {}

    const Allocation* find(uint64_t jobid) const;
    const std::map<uint64_t, Allocation>& all() const { return jobs_; }

    // Records job `jobid`'s allocation. Error EEXIST: it holds one already.
    Result<void> add(uint64_t jobid, Allocation a);
    // Gives back all of it. Error ENOENT.
    Result<void> remove(uint64_t jobid);
    // Gives back what it holds on the nodes of `ranks`; true when that was
    // all it held with a rank (it is then removed whole). Error ENOENT.
    Result<bool> remove_ranks(uint64_t jobid, const IdSet& ranks);
    // A reservation that came due becomes an allocation from `now`, as
    // long as it was. Error ENOENT: no such reservation.
    Result<void> start_reserved(uint64_t jobid, int64_t now);
    // Moves the end of an allocation. Error ENOENT (a reservation too).
    Result<void> extend(uint64_t jobid, int64_t end);

    // The ends after `after`, ascending: the only times a request that does
    // not fit now can start to fit.
    std::vector<int64_t> release_times(int64_t after) const;

    // For a new graph: moves every allocation's claims to the vertices of
    // `next` with the same rank, type and id, and drops reservations.
    // Returns the jobs `next` cannot hold (dropped). Nothing is applied to
    // either pool: the caller swaps the pools and calls apply_all().
    std::vector<uint64_t> move_to(const ResourcePool& next);
    void apply_all();

  private:
    ResourcePool& pool_;
    std::map<uint64_t, Allocation> jobs_;
    std::multiset<int64_t> ends_;
};

}  // namespace banyan
