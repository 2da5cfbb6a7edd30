#include "sched/matcher.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace banyan {

using Needs = std::vector<std::pair<TypeId, int64_t>>;

// One resource of the jobspec, resolved against the pool's types.
struct Matcher::Request {
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

namespace {

constexpr int64_t kHuge = kForever;

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

// How many a request asks for at most: max, else min (a range without a
// max takes its min, so the job starts as soon as its least fits).
uint64_t want_of(const JobspecCount& c) {
    if (!c.values.empty())
        return *std::max_element(c.values.begin(), c.values.end());
    return c.max.value_or(c.min);
}

// The largest count `c` allows that is at most `found`; 0 if none.
uint64_t legal_count(const JobspecCount& c, uint64_t found) {
    if (!c.values.empty()) {
        uint64_t best = 0;
        for (uint64_t v : c.values)
            if (v <= found)
                best = std::max(best, v);
        return best;
    }
    if (found < c.min)
        return 0;
    uint64_t limit = std::min(found, c.max.value_or(c.min));
    uint64_t best = c.min;
    for (;;) {
        uint64_t next = best;
        bool overflow = false;
        if (c.op == '+')
            overflow = __builtin_add_overflow(best, c.operand, &next);
        else if (c.op == '*')
            overflow = __builtin_mul_overflow(best, c.operand, &next);
        else
            for (uint64_t i = 1; i < c.operand && !overflow && next <= limit; ++i)
                overflow = __builtin_mul_overflow(next, best, &next);
        if (overflow || next <= best || next > limit)
            return best;
        best = next;
    }
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

Matcher::Matcher(const ResourceGraph& graph, MatchPolicy policy)
    : pool_(graph),
      policy_(std::move(policy)),
      node_type_(pool_.find_type("node")),
      marked_(pool_.size(), 0),
      taken_(pool_.size(), 0),
      claim_of_(pool_.size(), 0) {}

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
    if (jobs_.count(jobid))
        return make_error(EEXIST, fmt::format("job {} already holds resources", jobid));
    MatchResult res;
    auto requests = compile(jobspec);
    if (!requests) {
        res.unsatisfiable = true;
        res.reason = requests.error().message;
        return res;
    }
    int64_t duration = jobspec.duration > 0 ? static_cast<int64_t>(std::ceil(std::min(jobspec.duration, 1e15))) : 0;
    auto end_for = [&](int64_t start) { return duration ? std::min(start + duration, kForever) : kForever; };
    now_ = now;
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
            for (int64_t t : pool_.release_times(now))
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
            pool_.apply(claims_, res.start, res.end, !res.reserved, 1);
            jobs_[jobid] = Job{claims_, res.start, res.end, res.reserved};
        }
    }
    if (!res.matched)
        res.reason = res.unsatisfiable ? "unsatisfiable: the resource graph can never hold this request"
                                       : "no matching resources are free";
    res.visits = visits_;
    return res;
}

Result<void> Matcher::could_ever_fit(const Jobspec& jobspec) {
    auto requests = compile(jobspec);
    if (!requests)
        return make_error(ENOSPC, requests.error().message);
    if (!try_at(*requests, 0, kForever, true, true))
        return make_error(ENOSPC, "unsatisfiable: the resource graph can never hold this request");
    return {};
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
    // A vertex is the same one in the new graph when its rank, type and id
    // are: every claim (memory amounts, exclusive holds not shown in R)
    // moves over as it is.
    using Key = std::tuple<int32_t, std::string, int64_t>;
    auto key_of = [](const ResourcePool& pool, uint32_t v) {
        return Key{pool.rank(v), std::string(pool.type_name(pool.type(v))), pool.id(v)};
    };
    ResourcePool next(graph);
    std::map<Key, uint32_t> by_key;
    for (uint32_t v = 0; v < next.size(); ++v)
        by_key.emplace(key_of(next, v), v);
    std::map<uint64_t, Job> moved;
    std::vector<uint64_t> lost;
    for (auto& [id, job] : jobs_) {
        if (job.reserved)
            continue;
        bool whole = true;
        for (Claim& c : job.claims) {
            auto it = by_key.find(key_of(pool_, c.vertex));
            if (it == by_key.end() || (c.consumes && next.vertex_size(it->second) < c.amount)) {
                whole = false;
                break;
            }
            c.vertex = it->second;
        }
        if (whole)
            moved.emplace(id, std::move(job));
        else
            lost.push_back(id);
    }
    pool_ = std::move(next);
    node_type_ = pool_.find_type("node");
    marked_.assign(pool_.size(), 0);
    taken_.assign(pool_.size(), 0);
    claim_of_.assign(pool_.size(), 0);
    epoch_ = 0;
    jobs_ = std::move(moved);
    for (const auto& [id, job] : jobs_)
        pool_.apply(job.claims, job.start, job.end, true, 1);
    return lost;
}

Rv1 Matcher::allocated() const {
    Rv1 all;
    for (const auto& [id, job] : jobs_) {
        if (job.reserved)
            continue;
        for (const auto& [rank, children] : to_rv1(job.claims, job.start, job.end).ranks) {
            auto& c = all.ranks[rank];
            c.cores = c.cores.union_with(children.cores);
            c.gpus = c.gpus.union_with(children.gpus);
        }
    }
    for (const auto& [rank, children] : all.ranks)
        if (auto node = pool_.node_of_rank(static_cast<int32_t>(rank)))
            all.nodelist.append(pool_.name(*node));
    return all;
}

Result<void> Matcher::cancel(uint64_t jobid) {
    auto it = jobs_.find(jobid);
    if (it == jobs_.end())
        return make_error(ENOENT, fmt::format("job {} holds no resources", jobid));
    const Job& j = it->second;
    pool_.apply(j.claims, j.start, j.end, !j.reserved, -1);
    jobs_.erase(it);
    return {};
}

const Matcher::Job* Matcher::job(uint64_t jobid) const {
    auto it = jobs_.find(jobid);
    return it == jobs_.end() ? nullptr : &it->second;
}

Result<void> Matcher::start_reserved(uint64_t jobid, int64_t now) {
    auto it = jobs_.find(jobid);
    if (it == jobs_.end() || !it->second.reserved)
        return make_error(ENOENT, fmt::format("job {} has no reservation", jobid));
    Job& j = it->second;
    pool_.apply(j.claims, j.start, j.end, false, -1);
    j.end = j.end == kForever ? kForever : now + (j.end - j.start);
    j.start = now;
    j.reserved = false;
    pool_.apply(j.claims, j.start, j.end, true, 1);
    return {};
}

Result<void> Matcher::allocate_exact(uint64_t jobid, const Rv1& r, int64_t start, int64_t end) {
    if (jobs_.count(jobid))
        return make_error(EEXIST, fmt::format("job {} already holds resources", jobid));
    next_epoch();
    auto core = pool_.find_type("core"), gpu = pool_.find_type("gpu");
    for (const auto& [rank, children] : r.ranks) {
        auto node = pool_.node_of_rank(static_cast<int32_t>(rank));
        if (!node)
            return make_error(ENOENT, fmt::format("rank {} is not in the resource graph", rank));
        IdSet cores_found, gpus_found;
        for (uint32_t v = *node; v < pool_.subtree_end(*node); ++v) {
            TypeId t = pool_.type(v);
            uint32_t id = static_cast<uint32_t>(pool_.id(v));
            bool wanted =
                (core && t == *core && children.cores.contains(id)) || (gpu && t == *gpu && children.gpus.contains(id));
            if (!wanted)
                continue;
            if (pool_.avail(v, t, start, end) < 1)
                return make_error(EBUSY, fmt::format("rank {} {}{} is already in use", rank, pool_.type_name(t), id));
            (t == *core ? cores_found : gpus_found).insert(id);
            push_claim({v, 1, true, true, true});
            for (uint32_t a = pool_.parent(v); a != kNoVertex && marked_[a] != epoch_; a = pool_.parent(a))
                push_claim({a, 1, false, false, true});
        }
        if (!(cores_found == children.cores) || !(gpus_found == children.gpus))
            return make_error(ENOENT, fmt::format("rank {} lacks some of cores {} gpus {}", rank,
                                                  children.cores.format(), children.gpus.format()));
    }
    pool_.apply(claims_, start, end, true, 1);
    jobs_[jobid] = Job{claims_, start, end, false};
    return {};
}

Result<void> Matcher::extend(uint64_t jobid, int64_t end) {
    auto it = jobs_.find(jobid);
    if (it == jobs_.end() || it->second.reserved)
        return make_error(ENOENT, fmt::format("job {} holds no allocation", jobid));
    Job& j = it->second;
    pool_.apply(j.claims, j.start, j.end, true, -1);
    j.end = end;
    pool_.apply(j.claims, j.start, j.end, true, 1);
    return {};
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

bool Matcher::may_hold(uint32_t v, std::span<const std::pair<TypeId, int64_t>> needs) const {
    bool now = !ignore_use_ && start_ == now_;
    for (auto [t, n] : needs) {
        if (now && pool_.free_now(v, t) < n)
            return false;
        if (pool_.avail(v, t, start_, end_, ignore_use_) < n)
            return false;
    }
    return true;
}

bool Matcher::match_request(uint32_t v, const Request& r, bool exclusive) {
    if (r.slot) {
        // Everything in a slot is the job's alone.
        uint64_t want = want_of(r.count);
        Checkpoint before = checkpoint();
        std::vector<Checkpoint> after;
        while (after.size() < want) {
            Checkpoint cp = checkpoint();
            bool ok =
                std::all_of(r.with.begin(), r.with.end(), [&](const Request& w) { return match_request(v, w, true); });
            if (!ok) {
                rollback(cp);
                break;
            }
            after.push_back(checkpoint());
        }
        uint64_t legal = legal_count(r.count, after.size());
        if (legal == 0) {
            rollback(before);
            return false;
        }
        if (legal < after.size())
            rollback(after[legal - 1]);
        return true;
    }
    Checkpoint cp = checkpoint();
    int64_t want = static_cast<int64_t>(std::min<uint64_t>(want_of(r.count), kHuge));
    int64_t found = collect(v, r, want, exclusive);
    uint64_t legal = legal_count(r.count, static_cast<uint64_t>(found));
    if (legal == 0) {
        rollback(cp);
        return false;
    }
    if (static_cast<int64_t>(legal) < found) {
        // Take the allowed count again, from the same first candidates.
        rollback(cp);
        collect(v, r, static_cast<int64_t>(legal), exclusive);
    }
    return true;
}

int64_t Matcher::collect(uint32_t v, const Request& r, int64_t want, bool exclusive) {
    int64_t found = 0;
    for_each_child(v, r.scan_type, want, [&](uint32_t u) {
        ++visits_;
        if ((!ignore_status_ && !pool_.up(u)) || taken_[u] == epoch_)
            return true;
        if (pool_.type(u) == r.type) {
            if (r.leaf) {
                int64_t take = std::min(pool_.avail(u, r.type, start_, end_, ignore_use_), want - found);
                if (take > 0 && marked_[u] != epoch_) {
                    push_claim({u, take, exclusive || r.exclusive, true, true});
                    taken_[u] = epoch_;
                    found += take;
                }
            } else if (claim_unit(u, r, exclusive)) {
                ++found;
            }
        } else if (may_hold(u, r.unit_needs)) {
            bool first_visit = marked_[u] != epoch_;
            bool node_x = policy_.node_exclusive && node_type_ && pool_.type(u) == *node_type_;
            Checkpoint cp = checkpoint();
            if (node_x && first_visit && !enter_node_exclusively(u))
                return true;
            int64_t got = collect(u, r, want - found, exclusive || node_x);
            if (got == 0) {
                rollback(cp);
                return true;
            }
            if (first_visit && !node_x)
                push_claim({u, 1, false, false, true});
            found += got;
        }
        return found < want;
    });
    return found;
}

bool Matcher::enter_node_exclusively(uint32_t u) {
    if (!ignore_use_ && !pool_.subtree_idle(u, start_, end_))
        return false;
    push_claim({u, 1, true, true, true});
    exclusives_.emplace_back(u, true);
    return true;
}

bool Matcher::claim_unit(uint32_t u, const Request& r, bool exclusive) {
    if (marked_[u] == epoch_ || !may_hold(u, r.unit_needs))
        return false;
    bool is_node = node_type_ && pool_.type(u) == *node_type_;
    bool x = exclusive || r.exclusive || (policy_.node_exclusive && is_node);
    if (x ? !ignore_use_ && !pool_.subtree_idle(u, start_, end_)
          : pool_.avail(u, pool_.type(u), start_, end_, ignore_use_) < 1)
        return false;
    Checkpoint cp = checkpoint();
    push_claim({u, 1, x, x, true});
    taken_[u] = epoch_;
    // A node the job asked to have alone, or that the policy gives whole,
    // is all the job's: its R lists every core. Inside a slot the rest of
    // the vertex is only held, as Fluxion does.
    if (x)
        exclusives_.emplace_back(u, is_node && (r.exclusive || policy_.node_exclusive));
    for (const auto& w : r.with)
        if (!match_request(u, w, x)) {
            rollback(cp);
            return false;
        }
    return true;
}

void Matcher::hold_exclusive_subtrees() {
    for (auto [e, show] : exclusives_) {
        for (uint32_t d = e + 1; d < pool_.subtree_end(e); ++d) {
            int64_t amount = pool_.is_leaf(d) ? pool_.vertex_size(d) : 1;
            if (marked_[d] != epoch_) {
                push_claim({d, amount, true, true, show});
                continue;
            }
            Claim& c = claims_[claim_of_[d]];
            if (!c.consumes) {
                c.consumes = c.exclusive = true;
            } else if (c.amount < amount) {
                // The rest of a memory pool the job took part of: held, not shown.
                claims_.push_back({d, amount - c.amount, true, true, false});
            }
        }
    }
}

template <class Visit>
void Matcher::for_each_child(uint32_t v, TypeId t, int64_t want, Visit&& visit) {
    std::span<const uint32_t> kids = v == kNoVertex ? pool_.roots() : pool_.children(v);
    if (policy_.order == MatchPolicy::Order::locality) {
        // Best fit: the children that can hold all that is wanted, tightest
        // first; then the others, fullest first, so the job spans as few
        // subtrees as it can.
        std::vector<std::pair<int64_t, uint32_t>> scored;
        for (uint32_t u : kids)
            if (int64_t a = pool_.avail(u, t, start_, end_, ignore_use_); a > 0)
                scored.emplace_back(a >= want ? a : kHuge - a, u);
        std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        for (auto [score, u] : scored)
            if (!visit(u))
                return;
        return;
    }
    bool high = policy_.order == MatchPolicy::Order::high;
    std::span<const uint64_t> bits;
    if (!ignore_use_ && start_ == now_ && v != kNoVertex)
        bits = pool_.free_children(v, t);
    if (!bits.empty()) {
        // Only the children with something of type t free now.
        for (size_t i = 0; i < bits.size(); ++i) {
            size_t w = high ? bits.size() - 1 - i : i;
            for (uint64_t m = bits[w]; m;) {
                int b = high ? 63 - std::countl_zero(m) : std::countr_zero(m);
                m &= ~(uint64_t{1} << b);
                if (!visit(kids[w * 64 + static_cast<size_t>(b)]))
                    return;
            }
        }
        return;
    }
    if (high) {
        for (size_t i = kids.size(); i-- > 0;)
            if (!visit(kids[i]))
                return;
    } else {
        for (uint32_t u : kids)
            if (!visit(u))
                return;
    }
}

void Matcher::next_epoch() {
    if (++epoch_ == 0) {
        std::fill(marked_.begin(), marked_.end(), 0);
        std::fill(taken_.begin(), taken_.end(), 0);
        epoch_ = 1;
    }
    claims_.clear();
    exclusives_.clear();
}

void Matcher::push_claim(const Claim& c) {
    marked_[c.vertex] = epoch_;
    claim_of_[c.vertex] = static_cast<uint32_t>(claims_.size());
    claims_.push_back(c);
}

void Matcher::rollback(Checkpoint cp) {
    for (size_t i = claims_.size(); i-- > cp.claims;) {
        marked_[claims_[i].vertex] = 0;
        taken_[claims_[i].vertex] = 0;
    }
    claims_.resize(cp.claims);
    exclusives_.resize(cp.exclusives);
}

Rv1 Matcher::to_rv1(std::span<const Claim> claims, int64_t start, int64_t end) const {
    Rv1 r;
    auto core = pool_.find_type("core"), gpu = pool_.find_type("gpu");
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
    }
    for (const auto& [rank, children] : r.ranks)
        if (auto node = pool_.node_of_rank(static_cast<int32_t>(rank)))
            r.nodelist.append(pool_.name(*node));
    r.starttime = static_cast<double>(start);
    r.expiration = end >= kForever ? 0 : static_cast<double>(end);
    return r;
}

}  // namespace banyan
