#include "sched/allocation_table.hpp"

#include <algorithm>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "sched/planner.hpp"

namespace banyan {

const Allocation* AllocationTable::find(uint64_t jobid) const {
    auto it = jobs_.find(jobid);
    return it == jobs_.end() ? nullptr : &it->second;
}

Result<void> AllocationTable::add(uint64_t jobid, Allocation a) {
    if (jobs_.count(jobid))
        return make_error(EEXIST, fmt::format("job {} already holds resources", jobid));
    pool_.apply(a.claims, a.start, a.end, !a.reserved, 1);
    ends_.insert(a.end);
    jobs_.emplace(jobid, std::move(a));
    return {};
}

Result<void> AllocationTable::remove(uint64_t jobid) {
    auto it = jobs_.find(jobid);
    if (it == jobs_.end())
        return make_error(ENOENT, fmt::format("job {} holds no resources", jobid));
    const Allocation& a = it->second;
    pool_.apply(a.claims, a.start, a.end, !a.reserved, -1);
    ends_.erase(ends_.find(a.end));
    jobs_.erase(it);
    return {};
}

Result<bool> AllocationTable::remove_ranks(uint64_t jobid, const IdSet& ranks) {
    auto it = jobs_.find(jobid);
    if (it == jobs_.end())
        return make_error(ENOENT, fmt::format("job {} holds no resources", jobid));
    Allocation& a = it->second;
    auto released = [&](const Claim& c) {
        int32_t rank = pool_.rank(c.vertex);
        return rank >= 0 && ranks.contains(static_cast<uint32_t>(rank));
    };
    std::vector<Claim> gone, kept;
    for (const Claim& c : a.claims)
        (released(c) ? gone : kept).push_back(c);
    bool any_ranked_left =
        std::any_of(kept.begin(), kept.end(), [&](const Claim& c) { return pool_.rank(c.vertex) >= 0; });
    if (!any_ranked_left) {
        if (auto r = remove(jobid); !r)
            return r.error();
        return true;
    }
    // A shared vertex without a rank (a rack) stays listed only while the
    // job still holds something below it; one it holds whole stays.
    std::vector<Claim> still;
    for (const Claim& c : kept) {
        bool needed =
            c.consumes || pool_.rank(c.vertex) >= 0 || std::any_of(kept.begin(), kept.end(), [&](const Claim& d) {
                return pool_.rank(d.vertex) >= 0 && d.vertex > c.vertex && d.vertex < pool_.subtree_end(c.vertex);
            });
        (needed ? still : gone).push_back(c);
    }
    pool_.apply(gone, a.start, a.end, !a.reserved, -1);
    a.claims = std::move(still);
    return false;
}

Result<void> AllocationTable::start_reserved(uint64_t jobid, int64_t now) {
    auto it = jobs_.find(jobid);
    if (it == jobs_.end() || !it->second.reserved)
        return make_error(ENOENT, fmt::format("job {} has no reservation", jobid));
    Allocation& a = it->second;
    pool_.apply(a.claims, a.start, a.end, false, -1);
    ends_.erase(ends_.find(a.end));
    a.end = a.end == kForever ? kForever : now + (a.end - a.start);
    ends_.insert(a.end);
    a.start = now;
    a.reserved = false;
    pool_.apply(a.claims, a.start, a.end, true, 1);
    return {};
}

Result<void> AllocationTable::extend(uint64_t jobid, int64_t end) {
    auto it = jobs_.find(jobid);
    if (it == jobs_.end() || it->second.reserved)
        return make_error(ENOENT, fmt::format("job {} holds no allocation", jobid));
    Allocation& a = it->second;
    pool_.apply(a.claims, a.start, a.end, true, -1);
    ends_.erase(ends_.find(a.end));
    a.end = end;
    ends_.insert(end);
    pool_.apply(a.claims, a.start, a.end, true, 1);
    return {};
}

std::vector<int64_t> AllocationTable::release_times(int64_t after) const {
    // A request that does not fit now can only start to fit when a job
    // ends, even where another starts at once and the totals stay level.
    std::vector<int64_t> out;
    for (auto it = ends_.upper_bound(after); it != ends_.end() && *it < kForever; it = ends_.upper_bound(*it))
        out.push_back(*it);
    return out;
}

std::vector<uint64_t> AllocationTable::move_to(const ResourcePool& next) {
    // A vertex is the same one in the new graph when its rank, type and id
    // are: every claim (memory amounts, exclusive holds not shown in R)
    // moves over as it is.
    using Key = std::tuple<int32_t, std::string, int64_t>;
    auto key_of = [](const ResourcePool& pool, uint32_t v) {
        return Key{pool.rank(v), std::string(pool.type_name(pool.type(v))), pool.id(v)};
    };
    std::map<Key, uint32_t> by_key;
    for (uint32_t v = 0; v < next.size(); ++v)
        by_key.emplace(key_of(next, v), v);
    std::map<uint64_t, Allocation> moved;
    std::vector<uint64_t> lost;
    for (auto& [id, a] : jobs_) {
        if (a.reserved)
            continue;
        bool whole = true;
        for (Claim& c : a.claims) {
            auto it = by_key.find(key_of(pool_, c.vertex));
            if (it == by_key.end() || (c.consumes && next.vertex_size(it->second) < c.amount)) {
                whole = false;
                break;
            }
            c.vertex = it->second;
        }
        if (whole)
            moved.emplace(id, std::move(a));
        else
            lost.push_back(id);
    }
    jobs_ = std::move(moved);
    ends_.clear();
    for (const auto& [id, a] : jobs_)
        ends_.insert(a.end);
    return lost;
}

void AllocationTable::apply_all() {
    for (const auto& [id, a] : jobs_)
        pool_.apply(a.claims, a.start, a.end, true, 1);
}

}  // namespace banyan
