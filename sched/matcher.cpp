#include "sched/matcher.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/byte_size.hpp"

namespace banyan {

namespace {

// As large as a count gets: a sum or product past it stays at it.
constexpr int64_t kHuge = kForever;
using Needs = std::vector<std::pair<TypeId, int64_t>>;

int64_t saturating_multiply(int64_t a, int64_t b) {
    if (a != 0 && b > kHuge / a)
        return kHuge;
    return a * b;
}

void add_need(Needs& needs, TypeId t, int64_t n) {
    for (auto& [type, count] : needs)
        if (type == t) {
            count = std::min(kHuge, count + n);
            return;
        }
    needs.emplace_back(t, n);
}

uint64_t min_of(const JobspecCount& c) {
    return c.values.empty() ? c.min : *std::min_element(c.values.begin(), c.values.end());
}

}  // namespace

Result<MatchOp> match_op_from_name(std::string_view name) {
    if (name == "allocate")
        return MatchOp::allocate;
    if (name == "allocate_orelse_reserve")
        return MatchOp::allocate_orelse_reserve;
    if (name == "allocate_with_satisfiability")
        return MatchOp::allocate_with_satisfiability;
    if (name == "satisfiability")
        return MatchOp::satisfiability;
    return make_error(EINVAL, fmt::format("unknown match operation '{}' (known: allocate, allocate_orelse_reserve, "
                                          "allocate_with_satisfiability, satisfiability)",
                                          name));
}

Matcher::Matcher(const ResourceGraph& graph, std::unique_ptr<MatchPolicy> policy)
    : pool_(graph),
      policy_(std::move(policy)),
      node_type_(pool_.find_type("node")),
      core_type_(pool_.find_type("core")),
      marked_(pool_.size(), 0),
      taken_(pool_.size(), 0),
      claim_of_(pool_.size(), 0) {
    policy_->graph_changed(pool_);
}

// The job's constraint and profile hint, for one match.
struct Matcher::JobScope {
    JobScope(Matcher& m, const Jobspec& js) : matcher(m) {
        matcher.eligibility_.begin(js.constraint ? &*js.constraint : nullptr);
        matcher.profile_ = js.profile;
    }
    ~JobScope() {
        matcher.eligibility_.begin(nullptr);
        matcher.profile_ = Profile::none;
    }
    JobScope(const JobScope&) = delete;
    JobScope& operator=(const JobScope&) = delete;
    Matcher& matcher;
};

Result<std::vector<Matcher::Request>> Matcher::compile(const Jobspec& jobspec) const {
    std::vector<Request> out;
    auto one = [&](auto& self, const JobspecResource& jr) -> Result<Request> {
        Request r;
        r.count = jr.count;
        r.exclusive = jr.exclusive.value_or(false);
        r.slot = jr.type == "slot";
        if (!r.slot) {
            auto t = pool_.find_type(jr.type);
            if (!t)
                return make_error(ENOENT, fmt::format("the resource graph has no resource of type '{}'", jr.type));
            r.type = *t;
            r.leaf = pool_.is_leaf_type(*t) && jr.with.empty();
        }
        Needs inner;
        for (const auto& w : jr.with) {
            auto child = self(self, w);
            if (!child)
                return child.error();
            for (auto [t, n] : child->needs)
                add_need(inner, t, n);
            r.with.push_back(std::move(*child));
        }
        int64_t least = static_cast<int64_t>(std::min<uint64_t>(min_of(jr.count), kHuge));
        if (r.leaf) {
            r.scan_type = r.type;
            r.unit_needs = {{r.type, 1}};
            r.needs = {{r.type, least}};
            return r;
        }
        r.unit_needs = inner;
        if (!r.slot)
            add_need(r.unit_needs, r.type, 1);
        // Every claim uses leaves, but only exclusive ones use a node: scan
        // by a leaf type the unit needs, so that full nodes are skipped.
        r.scan_type = r.type;
        for (auto [t, n] : r.unit_needs)
            if (pool_.is_leaf_type(t)) {
                r.scan_type = t;
                break;
            }
        for (auto [t, n] : r.unit_needs)
            r.needs.emplace_back(t, saturating_multiply(n, least));
        return r;
    };
    for (const auto& jr : jobspec.resources) {
        auto r = one(one, jr);
        if (!r)
            return r.error();
        out.push_back(std::move(*r));
    }
    return out;
}

Result<MatchResult> Matcher::match(const Jobspec& jobspec, MatchOp op, int64_t now, uint64_t jobid) {
    if (!jobspec.reservation.empty() && op != MatchOp::satisfiability)
        return match_in_reservation(jobspec, now, jobid);
    return match_here(jobspec, op, now, jobid);
}

Result<MatchResult> Matcher::match_in_reservation(const Jobspec& jobspec, int64_t now, uint64_t jobid) {
    const AdvanceReservation* in = reservations_.find(jobspec.reservation);
    if (!in || now < in->start) {
        MatchResult res;
        res.reason = in ? fmt::format("reservation {} has not begun", in->name)
                        : fmt::format("no reservation named '{}'", jobspec.reservation);
        return res;
    }
    Result<MatchResult> r = [&] {
        auto lifted = reservations_.lift(in->name);
        return match_here(jobspec, MatchOp::allocate, now, jobid);
    }();
    if (r && r->matched)
        reservations_.carve(jobid);
    return r;
}

Result<void> Matcher::cancel(uint64_t jobid) {
    if (const Allocation* a = table_.find(jobid))
        reservations_.uncarve(jobid, *a);
    return table_.remove(jobid);
}

Result<void> Matcher::put_back(uint64_t jobid, Allocation allocation) {
    if (auto r = table_.add(jobid, std::move(allocation)); !r)
        return r;
    reservations_.carve(jobid);
    return {};
}

Result<bool> Matcher::cancel_ranks(uint64_t jobid, const IdSet& ranks) {
    if (const Allocation* a = table_.find(jobid))
        reservations_.uncarve(jobid, *a);
    auto whole = table_.remove_ranks(jobid, ranks);
    if (whole && !*whole)
        reservations_.carve(jobid);
    return whole;
}

Result<void> Matcher::extend(uint64_t jobid, int64_t end) {
    const Allocation* a = table_.find(jobid);
    if (!a || a->reserved)
        return table_.extend(jobid, end);  // (its error)
    reservations_.uncarve(jobid, *a);
    auto r = table_.extend(jobid, end);
    reservations_.carve(jobid);
    return r;
}

int64_t Matcher::window_end(const Jobspec& jobspec, int64_t start) {
    int64_t duration = jobspec.duration > 0 ? static_cast<int64_t>(std::ceil(std::min(jobspec.duration, 1e15))) : 0;
    return duration ? std::min(start + duration, kForever) : kForever;
}

bool Matcher::fits_now(const Jobspec& jobspec, int64_t now) {
    if (!jobspec.reservation.empty()) {
        const AdvanceReservation* in = reservations_.find(jobspec.reservation);
        if (!in || now < in->start)
            return false;
        auto lifted = reservations_.lift(in->name);
        return fits_here(jobspec, now);
    }
    return fits_here(jobspec, now);
}

bool Matcher::fits_here(const Jobspec& jobspec, int64_t now) {
    auto requests = compile(jobspec);
    if (!requests)
        return false;
    now_ = now;
    JobScope scope(*this, jobspec);
    visits_ = 0;
    return try_at(*requests, now, window_end(jobspec, now), false);
}

Result<MatchResult> Matcher::match_here(const Jobspec& jobspec, MatchOp op, int64_t now, uint64_t jobid) {
    if (table_.find(jobid))
        return make_error(EEXIST, fmt::format("job {} already holds resources", jobid));
    MatchResult res;
    auto requests = compile(jobspec);
    if (!requests) {
        res.unsatisfiable = true;
        res.reason = requests.error().message;
        return res;
    }
    auto end_for = [&](int64_t start) { return window_end(jobspec, start); };
    now_ = now;
    JobScope scope(*this, jobspec);
    visits_ = 0;
    if (op == MatchOp::satisfiability) {
        res.matched = try_at(*requests, now, end_for(now), true);
        res.unsatisfiable = !res.matched;
        if (res.matched)
            res.claims = claims_;
    } else {
        if (try_at(*requests, now, end_for(now), false)) {
            res.matched = true;
            res.start = now;
        } else if (op == MatchOp::allocate_orelse_reserve) {
            // When a job ends, or an advance reservation does.
            std::vector<int64_t> times = table_.release_times(now);
            if (!reservations_.empty()) {
                reservations_.add_ends_after(now, times);
                std::sort(times.begin(), times.end());
                times.erase(std::unique(times.begin(), times.end()), times.end());
            }
            for (int64_t t : times)
                if (try_at(*requests, t, end_for(t), false)) {
                    res.matched = res.reserved = true;
                    res.start = t;
                    break;
                }
        }
        if (!res.matched && op != MatchOp::allocate)
            res.unsatisfiable = !try_at(*requests, now, end_for(now), true);
        if (res.matched) {
            res.end = end_for(res.start);
            res.claims = claims_;
            if (auto added = table_.add(jobid, Allocation{claims_, res.start, res.end, res.reserved}); !added)
                return added.error();
            policy_->matched(pool_, claims_);
        }
    }
    if (!res.matched)
        res.reason = res.unsatisfiable ? eligibility_.unsatisfiable_reason() : "no matching resources are free";
    res.visits = visits_;
    return res;
}

Result<void> Matcher::could_ever_fit(const Jobspec& jobspec) {
    auto requests = compile(jobspec);
    if (!requests)
        return make_error(ENOSPC, requests.error().message);
    JobScope scope(*this, jobspec);
    if (!try_at(*requests, 0, kForever, true, true)) {
        if (auto shortfall = slot_shortfall(*requests); !shortfall.empty())
            return make_error(ENOSPC, shortfall);
        return make_error(ENOSPC, eligibility_.unsatisfiable_reason());
    }
    return {};
}

bool Matcher::any_free(int64_t now) const {
    std::optional<TypeId> gpu = pool_.find_type("gpu");
    if (!core_type_ && !gpu)
        return true;
    for (uint32_t root : pool_.roots())
        for (std::optional<TypeId> t : {core_type_, gpu})
            if (t && pool_.avail(root, *t, now, now + 1) > 0)
                return true;
    return false;
}

// A slot (one task) is on one node: what one slot needs of a type that no
// node has as much of, named ("" when none).
std::string Matcher::slot_shortfall(const std::vector<Request>& requests) const {
    if (!node_type_)
        return "";
    for (const Request& r : requests) {
        if (!r.slot) {
            if (auto inner = slot_shortfall(r.with); !inner.empty())
                return inner;
            continue;
        }
        for (auto [type, need] : r.unit_needs) {
            int64_t most = 0;
            for (const auto& [rank, v] : pool_.nodes_by_rank())
                most = std::max(most, pool_.total(v, type));
            if (need > most) {
                std::string name(pool_.type_name(type));
                // An amount of bytes reads as one: "4 GiB of memory".
                auto bytes = [](int64_t amount, uint64_t unit) {  // at most 16 EiB
                    return static_cast<uint64_t>(amount) > UINT64_MAX / unit ? UINT64_MAX
                                                                              : static_cast<uint64_t>(amount) * unit;
                };
                if (uint64_t unit = pool_.unit_bytes(type))
                    return fmt::format("unsatisfiable: a task needs {} of {} on one node; the largest node has {}",
                                       format_byte_size(bytes(need, unit)), name, format_byte_size(bytes(most, unit)));
                return fmt::format("unsatisfiable: a task needs {} {}{} on one node; the largest node has {}", need,
                                   name, need == 1 ? "" : "s", most);
            }
        }
    }
    return "";
}

void Matcher::set_node_states(const IdSet& drained, const IdSet& down) {
    for (auto [rank, v] : pool_.nodes_by_rank()) {
        auto r = static_cast<uint32_t>(rank);
        pool_.set_status(v, down.contains(r)      ? VertexStatus::down
                            : drained.contains(r) ? VertexStatus::drained
                                                  : VertexStatus::up);
    }
}

std::vector<uint64_t> Matcher::reload(const ResourceGraph& graph) {
    ResourcePool next(graph);
    std::vector<uint64_t> lost = table_.move_to(next);
    pool_ = std::move(next);
    node_type_ = pool_.find_type("node");
    core_type_ = pool_.find_type("core");
    policy_->graph_changed(pool_);
    in_id_order_.clear();
    eligibility_.clear();
    marked_.assign(pool_.size(), 0);
    taken_.assign(pool_.size(), 0);
    claim_of_.assign(pool_.size(), 0);
    epoch_ = 0;
    table_.apply_all();
    reservations_.reapply();
    return lost;
}

Rv1 Matcher::allocated() const {
    Rv1 all;
    for (const auto& [id, job] : table_.all()) {
        if (job.reserved)
            continue;
        for (const auto& [rank, children] : to_rv1(job.claims, job.start, job.end, RMemory::written).ranks) {
            auto& c = all.ranks[rank];
            c.cores = c.cores.union_with(children.cores);
            c.gpus = c.gpus.union_with(children.gpus);
            c.memory += children.memory;
        }
    }
    for (const auto& [rank, children] : all.ranks)
        if (auto node = pool_.node_of_rank(static_cast<int32_t>(rank)))
            all.nodelist.append(pool_.name(*node));
    return all;
}

Result<void> Matcher::allocate_exact(uint64_t jobid, const Rv1& r, int64_t start, int64_t end) {
    // A job that runs is a fact, not a request: it is placed where it runs
    // whatever reservation its window meets, and carved out of each (one
    // added later carves it out then).
    Result<void> done = [&] {
        auto lifted = reservations_.lift_all();
        return allocate_exact_here(jobid, r, start, end);
    }();
    if (done)
        reservations_.carve(jobid);
    return done;
}

Result<void> Matcher::allocate_exact_here(uint64_t jobid, const Rv1& r, int64_t start, int64_t end) {
    if (table_.find(jobid))
        return make_error(EEXIST, fmt::format("job {} already holds resources", jobid));
    next_epoch();
    auto core = pool_.find_type("core"), gpu = pool_.find_type("gpu"), memory = pool_.find_type("memory");
    uint64_t memory_unit = memory ? pool_.unit_bytes(*memory) : 0;
    auto claim_with_ancestors = [&](uint32_t v, int64_t amount) {
        push_claim({v, amount, true, true, true});
        for (uint32_t a = pool_.parent(v); a != kNoVertex && marked_[a] != epoch_; a = pool_.parent(a))
            push_claim({a, 1, false, false, true});
    };
    for (const auto& [rank, children] : r.ranks) {
        auto node = pool_.node_of_rank(static_cast<int32_t>(rank));
        if (!node)
            return make_error(ENOENT, fmt::format("rank {} is not in the resource graph", rank));
        IdSet cores_found, gpus_found;
        // Memory is an amount: taken from the node's pools in graph order,
        // as the match took it.
        int64_t memory_left = 0;
        if (children.memory) {
            if (!memory_unit)
                return make_error(ENOENT, fmt::format("rank {} holds memory, and the graph counts none", rank));
            memory_left = static_cast<int64_t>(children.memory / memory_unit + (children.memory % memory_unit != 0));
        }
        for (uint32_t v = *node; v < pool_.subtree_end(*node); ++v) {
            TypeId t = pool_.type(v);
            if (memory && t == *memory && memory_left > 0) {
                int64_t take = std::min(memory_left, pool_.avail(v, t, start, end));
                if (take > 0) {
                    claim_with_ancestors(v, take);
                    memory_left -= take;
                }
                continue;
            }
            uint32_t id = static_cast<uint32_t>(pool_.id(v));
            bool wanted =
                (core && t == *core && children.cores.contains(id)) || (gpu && t == *gpu && children.gpus.contains(id));
            if (!wanted)
                continue;
            if (pool_.avail(v, t, start, end) < 1)
                return make_error(EBUSY, fmt::format("rank {} {}{} is already in use", rank, pool_.type_name(t), id));
            (t == *core ? cores_found : gpus_found).insert(id);
            claim_with_ancestors(v, 1);
        }
        if (!(cores_found == children.cores) || !(gpus_found == children.gpus))
            return make_error(ENOENT, fmt::format("rank {} lacks some of cores {} gpus {}", rank,
                                                  children.cores.format(), children.gpus.format()));
        if (memory_left > 0)
            return make_error(EBUSY, fmt::format("rank {} lacks {} of free memory", rank,
                                                 format_byte_size(static_cast<uint64_t>(memory_left) * memory_unit)));
    }
    return table_.add(jobid, Allocation{claims_, start, end, false});
}

bool Matcher::try_at(const std::vector<Request>& requests, int64_t start, int64_t end, bool ignore_use,
                     bool ignore_status) {
    next_epoch();
    start_ = start;
    end_ = end;
    ignore_use_ = ignore_use;
    ignore_status_ = ignore_status;
    // Most jobs that do not fit fail here, on the root's aggregates.
    Needs all;
    for (const auto& r : requests)
        for (auto [t, n] : r.needs)
            add_need(all, t, n);
    if (pool_.roots().size() == 1 && !may_hold(pool_.roots()[0], all))
        return false;
    for (const auto& r : requests)
        if (!match_request(kNoVertex, r, false))
            return false;
    if (!ignore_use)
        hold_exclusive_subtrees();
    return true;
}

bool Matcher::usable(uint32_t u) const {
    if (!ignore_status_ && !pool_.up(u))
        return false;
    // RFC 31: a constraint is about nodes only.
    return !is_node(u) || eligibility_.meets(u);
}

Rv1 Matcher::to_rv1(std::span<const Claim> claims, int64_t start, int64_t end, RMemory with_memory) const {
    Rv1 r;
    auto core = pool_.find_type("core"), gpu = pool_.find_type("gpu"), memory = pool_.find_type("memory");
    uint64_t memory_unit = memory && with_memory == RMemory::written ? pool_.unit_bytes(*memory) : 0;
    for (const Claim& c : claims) {
        int32_t rank = pool_.rank(c.vertex);
        if (!c.shown || rank < 0)
            continue;
        auto& children = r.ranks[static_cast<uint32_t>(rank)];
        TypeId t = pool_.type(c.vertex);
        if (core && t == *core)
            children.cores.insert(static_cast<uint32_t>(pool_.id(c.vertex)));
        else if (gpu && t == *gpu)
            children.gpus.insert(static_cast<uint32_t>(pool_.id(c.vertex)));
        else if (memory_unit && t == *memory && c.asked)
            children.memory += static_cast<uint64_t>(c.amount) * memory_unit;
    }
    for (const auto& [rank, children] : r.ranks)
        if (auto node = pool_.node_of_rank(static_cast<int32_t>(rank)))
            r.nodelist.append(pool_.name(*node));
    r.starttime = static_cast<double>(start);
    r.expiration = end >= kForever ? 0 : static_cast<double>(end);
    return r;
}

}  // namespace banyan
