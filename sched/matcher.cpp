#include "sched/matcher.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
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
      core_type_(pool_.find_type("core")),
      first_weight_(pool_.size(), kUntouched),
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
    ConstraintScope scope(*this, jobspec);
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
            for (int64_t t : release_times(now))
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
            ends_.insert(res.end);
            if (policy_.order == MatchPolicy::Order::most_free)
                update_first_weights(claims_);
        }
    }
    if (!res.matched)
        res.reason = res.unsatisfiable ? unsatisfiable_reason() : "no matching resources are free";
    res.visits = visits_;
    return res;
}

void Matcher::update_first_weights(std::span<const Claim> claims) {
    // As Fluxion's by_outedges: each vertex on the new job's path gets the
    // amount free now below it of the scarcest type it has below (nodes
    // where there are any, else cores); the others keep what they had
    // (untouched: first of all). Leaves keep no weight. A cancel leaves
    // the weights as they are, as in Fluxion.
    for (const Claim& c : claims) {
        uint32_t v = c.vertex;
        if (!c.shown || pool_.is_leaf(v))
            continue;
        bool is_node = node_type_ && pool_.type(v) == *node_type_;
        bool nodes_below = node_type_ && pool_.total(v, *node_type_) > (is_node ? 1 : 0);
        std::optional<TypeId> t = nodes_below ? node_type_ : core_type_;
        first_weight_[v] = t ? static_cast<uint64_t>(std::max<int64_t>(0, pool_.unmatched_now(v, *t))) : 0;
    }
}

std::vector<int64_t> Matcher::release_times(int64_t after) const {
    // A request that does not fit now can only start to fit when a job
    // ends, even where another starts at once and the totals stay level.
    std::vector<int64_t> out;
    for (auto it = ends_.upper_bound(after); it != ends_.end() && *it < kForever; it = ends_.upper_bound(*it))
        out.push_back(*it);
    return out;
}

Result<void> Matcher::could_ever_fit(const Jobspec& jobspec) {
    auto requests = compile(jobspec);
    if (!requests)
        return make_error(ENOSPC, requests.error().message);
    ConstraintScope scope(*this, jobspec);
    if (!try_at(*requests, 0, kForever, true, true)) {
        if (auto shortfall = slot_shortfall(*requests); !shortfall.empty())
            return make_error(ENOSPC, shortfall);
        return make_error(ENOSPC, unsatisfiable_reason());
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
                return fmt::format("unsatisfiable: a task needs {} {}{} on one node; the largest node has {}", need,
                                   name, need == 1 ? "" : "s", most);
            }
        }
    }
    return "";
}

const std::vector<uint64_t>* Matcher::eligible_children(uint32_t v) {
    if (!constraint_)
        return nullptr;
    if (!eligible_now_)
        eligible_now_ = &eligible_for(*constraint_);
    auto mask = eligible_now_->find(v);
    return mask == eligible_now_->end() ? nullptr : &mask->second;
}

const Matcher::Eligible& Matcher::eligible_for(const Constraint& constraint) {
    std::string key = constraint.to_json().dump();
    auto it = eligible_.find(key);
    if (it == eligible_.end()) {
        // Per constraint, once per graph: which vertices above the nodes
        // have a node below them that meets it, as a bitmap of children for
        // each such vertex that keeps free-children bitmaps. Below a node
        // nothing is filtered: the node was checked on the way in. Only the
        // nodes and their ancestors are read, not the whole graph.
        if (eligible_.size() >= 256)
            eligible_.clear();  // eligible_now_ is set from the result, after this
        constexpr uint8_t kSeen = 1, kMeets = 2;
        std::vector<uint8_t> flags(pool_.size(), 0);
        std::vector<uint32_t> above;
        for (const auto& [rank, node] : pool_.nodes_by_rank()) {
            bool meets = node_satisfies(node, *constraint_);
            flags[node] = meets ? kMeets : 0;
            for (uint32_t a = pool_.parent(node); a != kNoVertex; a = pool_.parent(a)) {
                bool seen = flags[a] & kSeen;
                if (seen && (!meets || (flags[a] & kMeets)))
                    break;  // its ancestors are seen (and marked) already
                if (!seen)
                    above.push_back(a);
                flags[a] |= kSeen | (meets ? kMeets : 0);
            }
        }
        Eligible masks;
        // A node without a rank is not in nodes_by_rank: no masks then.
        auto roots = pool_.roots();
        int64_t all_nodes = 0;
        for (uint32_t r : roots)
            all_nodes += node_type_ ? pool_.total(r, *node_type_) : 0;
        if (all_nodes != static_cast<int64_t>(pool_.nodes_by_rank().size()))
            above.clear();
        for (uint32_t u : above) {
            auto kids = pool_.children(u);
            if (kids.size() < ResourcePool::kBitmapFanout)
                continue;
            std::vector<uint64_t> bits((kids.size() + 63) / 64, 0);
            // A child with no node below it is not the constraint's to judge.
            for (size_t i = 0; i < kids.size(); ++i) {
                uint32_t k = kids[i];
                bool is_node = pool_.type(k) == *node_type_;
                if ((flags[k] & kMeets) || (!is_node && !(flags[k] & kSeen)))
                    bits[i / 64] |= uint64_t{1} << (i % 64);
            }
            masks.emplace(u, std::move(bits));
        }
        it = eligible_.emplace(std::move(key), std::move(masks)).first;
    }
    return it->second;
}

bool Matcher::usable(uint32_t u) const {
    if (!ignore_status_ && !pool_.up(u))
        return false;
    // RFC 31: a constraint is about nodes only.
    if (constraint_ && node_type_ && pool_.type(u) == *node_type_)
        return node_satisfies(u, *constraint_);
    return true;
}

bool Matcher::node_satisfies(uint32_t node, const Constraint& c) const {
    // Name and rank are read only for terms that need them: this runs per
    // node, and on a large graph each read of a vertex is a cache miss.
    return c.match(c.uses_hosts() ? pool_.name(node) : std::string(), c.uses_ranks() ? pool_.rank(node) : -1,
                   [&](std::string_view name) { return pool_.has_property(node, name); });
}

std::string Matcher::unsatisfiable_reason() const {
    if (!constraint_)
        return "unsatisfiable: the resource graph can never hold this request";
    // Name the part of the constraint that no node meets, if there is one.
    auto some_node = [&](const Constraint& c) {
        return std::any_of(pool_.nodes_by_rank().begin(), pool_.nodes_by_rank().end(),
                           [&](const auto& rank_vertex) { return node_satisfies(rank_vertex.second, c); });
    };
    if (auto term = constraint_->unmet_term(some_node)) {
        auto known = pool_.property_names();
        for (const auto& name : constraint_->property_names())
            if ((*term == name) && !std::binary_search(known.begin(), known.end(), name))
                return fmt::format("unsatisfiable: no node has the property '{}'", name);
        return fmt::format("unsatisfiable: no node satisfies '{}'", *term);
    }
    size_t nodes = 0;
    for (const auto& [rank, v] : pool_.nodes_by_rank())
        nodes += node_satisfies(v, *constraint_);
    return fmt::format("unsatisfiable: the {} node{} that satisfy '{}' can never hold this request", nodes,
                       nodes == 1 ? "" : "s", constraint_->describe());
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
    core_type_ = pool_.find_type("core");
    first_weight_.assign(pool_.size(), kUntouched);
    in_id_order_.clear();
    eligible_.clear();
    eligible_now_ = nullptr;
    marked_.assign(pool_.size(), 0);
    taken_.assign(pool_.size(), 0);
    claim_of_.assign(pool_.size(), 0);
    epoch_ = 0;
    jobs_ = std::move(moved);
    ends_.clear();
    for (const auto& [id, job] : jobs_)
        ends_.insert(job.end);
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
    ends_.erase(ends_.find(j.end));
    jobs_.erase(it);
    return {};
}

Result<bool> Matcher::cancel_ranks(uint64_t jobid, const IdSet& ranks) {
    auto it = jobs_.find(jobid);
    if (it == jobs_.end())
        return make_error(ENOENT, fmt::format("job {} holds no resources", jobid));
    Job& j = it->second;
    auto released = [&](const Claim& c) {
        int32_t rank = pool_.rank(c.vertex);
        return rank >= 0 && ranks.contains(static_cast<uint32_t>(rank));
    };
    std::vector<Claim> gone, kept;
    for (const Claim& c : j.claims)
        (released(c) ? gone : kept).push_back(c);
    bool any_ranked_left =
        std::any_of(kept.begin(), kept.end(), [&](const Claim& c) { return pool_.rank(c.vertex) >= 0; });
    if (!any_ranked_left) {
        if (auto r = cancel(jobid); !r)
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
    pool_.apply(gone, j.start, j.end, !j.reserved, -1);
    j.claims = std::move(still);
    return false;
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
    ends_.erase(ends_.find(j.end));
    j.end = j.end == kForever ? kForever : now + (j.end - j.start);
    ends_.insert(j.end);
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
    ends_.insert(end);
    return {};
}

Result<void> Matcher::extend(uint64_t jobid, int64_t end) {
    auto it = jobs_.find(jobid);
    if (it == jobs_.end() || it->second.reserved)
        return make_error(ENOENT, fmt::format("job {} holds no allocation", jobid));
    Job& j = it->second;
    pool_.apply(j.claims, j.start, j.end, true, -1);
    ends_.erase(ends_.find(j.end));
    j.end = end;
    ends_.insert(end);
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

bool Matcher::match_request(uint32_t v, const Request& r, bool exclusive, bool direct) {
    if (r.slot) {
        // Everything in a slot is the job's alone.
        uint64_t want = want_of(r.count);
        Checkpoint before = checkpoint();
        std::vector<Checkpoint> after;
        collect_slots(v, r, want, after);
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
    int64_t found = collect(v, r, want, exclusive, direct);
    uint64_t legal = legal_count(r.count, static_cast<uint64_t>(found));
    if (legal == 0) {
        rollback(cp);
        return false;
    }
    if (static_cast<int64_t>(legal) < found) {
        // Take the allowed count again, from the same first candidates.
        rollback(cp);
        collect(v, r, static_cast<int64_t>(legal), exclusive, direct);
    }
    return true;
}

// For `pack`: a slot is matched at a node or below one (a jobspec may put
// it under a socket), never above; one that holds nodes itself anywhere.
bool Matcher::at_or_below_a_node(uint32_t v, const Request& slot) const {
    if (!node_type_ || std::any_of(slot.unit_needs.begin(), slot.unit_needs.end(),
                                   [&](const auto& need) { return need.first == *node_type_; }))
        return true;
    if (v == kNoVertex)
        return false;
    return pool_.total(v, *node_type_) <= (pool_.type(v) == *node_type_ ? 1 : 0);
}

bool Matcher::holds_slot_members(uint32_t v, const Request& slot) const {
    if (v == kNoVertex)
        return false;
    auto kids = pool_.children(v);
    return std::all_of(slot.with.begin(), slot.with.end(), [&](const Request& w) {
        return std::any_of(kids.begin(), kids.end(), [&](uint32_t u) { return pool_.type(u) == w.type; });
    });
}

void Matcher::collect_slots(uint32_t v, const Request& r, uint64_t want, std::vector<Checkpoint>& after) {
    // A profile hint places slots the jobspec does not tie to nodes.
    if (profile_ != Profile::none && node_type_ && (v == kNoVertex || pool_.rank(v) < 0))
        return collect_slots_by_profile(v, r, want, after);
    if (policy_.slot_at_holder && policy_.flatten)
        return collect_slots_by_score(v, r, want, after);
    // As in Fluxion, a slot lies at the first vertex that has every type
    // of the slot directly beneath it, and takes its members from those
    // children only: a slot of cores and memory stays within one socket.
    // Banyan's `pack` takes a slot's members anywhere below one node (all
    // its sockets), never from two: a task runs on one node.
    bool at_slot = policy_.slot_at_holder ? holds_slot_members(v, r) : at_or_below_a_node(v, r);
    if (at_slot) {
        bool direct = policy_.slot_at_holder;
        while (after.size() < want) {
            Checkpoint cp = checkpoint();
            bool ok = std::all_of(r.with.begin(), r.with.end(),
                                  [&](const Request& w) { return match_request(v, w, true, direct); });
            if (!ok) {
                rollback(cp);
                return;
            }
            after.push_back(checkpoint());
        }
        return;
    }
    for_each_child(v, r.scan_type, static_cast<int64_t>(want - after.size()), [&](uint32_t u) {
        ++visits_;
        if (!usable(u) || taken_[u] == epoch_ || pool_.is_leaf(u) || !may_hold(u, r.unit_needs))
            return true;
        bool first_visit = marked_[u] != epoch_;
        bool node_x = policy_.node_exclusive && node_type_ && pool_.type(u) == *node_type_;
        Checkpoint cp = checkpoint();
        if (node_x && first_visit && !enter_node_exclusively(u))
            return true;
        // The shared parent is listed with the slots below it; claimed
        // first, so that dropping surplus slots drops it with them.
        if (first_visit && !node_x)
            push_claim({u, 1, false, false, true});
        size_t had = after.size();
        collect_slots(u, r, want, after);
        if (after.size() == had) {
            rollback(cp);
            return true;
        }
        return after.size() < want;
    });
}

int64_t Matcher::collect(uint32_t v, const Request& r, int64_t want, bool exclusive, bool direct) {
    if (policy_.flatten && !direct)
        return collect_by_id(v, r, want, exclusive);
    return collect_in_order(v, r, want, exclusive, direct);
}

int64_t Matcher::collect_in_order(uint32_t v, const Request& r, int64_t want, bool exclusive, bool direct) {
    int64_t found = 0;
    for_each_child(v, r.scan_type, want, [&](uint32_t u) {
        ++visits_;
        if (!usable(u) || taken_[u] == epoch_)
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
        } else if (!direct && may_hold(u, r.unit_needs)) {
            bool first_visit = marked_[u] != epoch_;
            bool node_x = policy_.node_exclusive && node_type_ && pool_.type(u) == *node_type_;
            Checkpoint cp = checkpoint();
            if (node_x && first_visit && !enter_node_exclusively(u))
                return true;
            int64_t got = collect_in_order(u, r, want - found, exclusive || node_x, false);
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

void Matcher::gather(uint32_t v, const Request& r, Candidates kind, std::vector<uint32_t>& out) {
    // Preorder (graph order) below v, through vertices that could hold a
    // unit and are not themselves candidates.
    auto candidate = [&](uint32_t u) {
        switch (kind) {
            case Candidates::of_type:
                return pool_.type(u) == r.type;
            case Candidates::slot_holders:
                return holds_slot_members(u, r);
            case Candidates::nodes:
                return node_type_ && pool_.type(u) == *node_type_;
        }
        return false;
    };
    std::vector<uint32_t> todo;
    if (v == kNoVertex)
        todo.assign(pool_.roots().rbegin(), pool_.roots().rend());
    else if (kind == Candidates::slot_holders && candidate(v))
        out.push_back(v);
    else
        for (size_t i = pool_.children(v).size(); i-- > 0;)
            todo.push_back(pool_.children(v)[i]);
    while (!todo.empty()) {
        uint32_t u = todo.back();
        todo.pop_back();
        ++visits_;
        if (!usable(u) || taken_[u] == epoch_)
            continue;
        // Nodes for a profile must hold a slot's worth; other candidates
        // are checked when they are claimed.
        if (candidate(u) && (kind != Candidates::nodes || may_hold(u, r.unit_needs))) {
            out.push_back(u);
            continue;
        }
        if (pool_.is_leaf(u) || !may_hold(u, r.unit_needs) || candidate(u))
            continue;
        auto kids = pool_.children(u);
        for (size_t i = kids.size(); i-- > 0;)
            todo.push_back(kids[i]);
    }
}

void Matcher::claim_path(uint32_t u, uint32_t v) {
    for (uint32_t a = pool_.parent(u); a != v && a != kNoVertex; a = pool_.parent(a))
        if (marked_[a] != epoch_)
            push_claim({a, 1, false, false, true});
}

bool Matcher::better_id(int64_t a, int64_t b) const {
    return policy_.order == MatchPolicy::Order::high ? a > b : a < b;
}

bool Matcher::children_in_id_order(uint32_t v, TypeId t) {
    uint64_t key = uint64_t{v} << 16 | t;
    if (auto it = in_id_order_.find(key); it != in_id_order_.end())
        return it->second;
    // Every vertex of type t below v is a child of v (their sizes add up
    // to the aggregate), and their ids ascend in graph order.
    int64_t sum = 0, last = std::numeric_limits<int64_t>::min();
    bool ascending = true;
    for (uint32_t u : pool_.children(v))
        if (pool_.type(u) == t) {
            sum += pool_.vertex_size(u);
            ascending = ascending && pool_.id(u) > last;
            last = pool_.id(u);
        }
    bool result = ascending && sum == pool_.total(v, t);
    in_id_order_.emplace(key, result);
    return result;
}

int64_t Matcher::collect_by_id(uint32_t v, const Request& r, int64_t want, bool exclusive) {
    // Where every candidate is a child of one vertex, in id order, the
    // scores order them as the walk does: walk, with its bitmaps.
    uint32_t top = v;
    if (top == kNoVertex && pool_.roots().size() == 1 && pool_.type(pool_.roots()[0]) != r.type)
        top = pool_.roots()[0];
    if (top != kNoVertex && children_in_id_order(top, r.type)) {
        bool first_visit = marked_[top] != epoch_;
        Checkpoint cp = checkpoint();
        if (top != v && first_visit)
            push_claim({top, 1, false, false, true});
        int64_t got = collect_in_order(top, r, want, exclusive, false);
        if (got == 0)
            rollback(cp);
        return got;
    }
    std::vector<uint32_t> candidates;
    gather(v, r, Candidates::of_type, candidates);
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](uint32_t a, uint32_t b) { return better_id(pool_.id(a), pool_.id(b)); });
    int64_t found = 0;
    for (uint32_t u : candidates) {
        if (found >= want)
            break;
        if (r.leaf) {
            int64_t take = std::min(pool_.avail(u, r.type, start_, end_, ignore_use_), want - found);
            if (take <= 0 || marked_[u] == epoch_)
                continue;
            push_claim({u, take, exclusive || r.exclusive, true, true});
            taken_[u] = epoch_;
            found += take;
        } else if (claim_unit(u, r, exclusive)) {
            ++found;
        } else {
            continue;
        }
        claim_path(u, v);
    }
    return found;
}

void Matcher::collect_slots_by_score(uint32_t v, const Request& r, uint64_t want, std::vector<Checkpoint>& after) {
    // Every holder's slots are scored (the sum of their members' ids, as
    // Fluxion scores them) without keeping them; the best `want` of all are
    // then taken, which is a first part of each holder's, in holder order.
    if (after.size() >= want)
        return;
    uint64_t more = want - after.size();  // `want` counts the slots held already
    std::vector<uint32_t> holders;
    gather(v, r, Candidates::slot_holders, holders);
    struct Scored {
        int64_t score;
        size_t holder;
    };
    std::vector<Scored> all;
    auto form = [&](uint32_t u) {
        return std::all_of(r.with.begin(), r.with.end(),
                           [&](const Request& w) { return match_request(u, w, true, true); });
    };
    for (size_t h = 0; h < holders.size(); ++h) {
        uint32_t u = holders[h];
        Checkpoint start = checkpoint();
        for (uint64_t n = 0; n < more; ++n) {
            Checkpoint cp = checkpoint();
            if (!form(u)) {
                rollback(cp);
                break;
            }
            int64_t score = 0;
            for (size_t i = cp.claims; i < claims_.size(); ++i)
                if (pool_.parent(claims_[i].vertex) == u)
                    score += pool_.id(claims_[i].vertex) + 1;
            all.push_back({score, h});
        }
        rollback(start);
    }
    std::stable_sort(all.begin(), all.end(),
                     [&](const Scored& a, const Scored& b) { return better_id(a.score, b.score); });
    std::vector<uint64_t> take(holders.size(), 0);
    for (size_t i = 0; i < all.size() && i < more; ++i)
        ++take[all[i].holder];
    for (size_t h = 0; h < holders.size(); ++h) {
        if (take[h] == 0)
            continue;
        // The holder is a shared parent of its slots, as are those above it.
        if (holders[h] != v) {
            if (marked_[holders[h]] != epoch_)
                push_claim({holders[h], 1, false, false, true});
            claim_path(holders[h], v);
        }
        for (uint64_t n = 0; n < take[h]; ++n) {
            Checkpoint cp = checkpoint();
            if (!form(holders[h])) {
                rollback(cp);
                break;
            }
            after.push_back(checkpoint());
        }
    }
}

void Matcher::collect_slots_by_profile(uint32_t v, const Request& r, uint64_t want, std::vector<Checkpoint>& after) {
    // The nodes below v that could hold a slot, in graph order.
    std::vector<uint32_t> nodes;
    gather(v, r, Candidates::nodes, nodes);
    // Tries to add slots below `node` until `until` slots are held.
    auto add_below = [&](uint32_t node, uint64_t until) {
        Checkpoint cp = checkpoint();
        if (marked_[node] != epoch_) {
            if (policy_.node_exclusive) {
                if (!enter_node_exclusively(node))
                    return false;
            } else {
                push_claim({node, 1, false, false, true});
            }
        }
        claim_path(node, v);
        size_t had = after.size();
        collect_slots(node, r, until, after);
        if (after.size() == had) {
            rollback(cp);
            return false;
        }
        return true;
    };
    if (profile_ == Profile::network) {
        // Network-bound: the fewest nodes. A node that holds all that is
        // left, the tightest such first; else the roomiest first.
        int64_t per_slot = 1;
        for (auto [t, n] : r.unit_needs)
            if (t == r.scan_type)
                per_slot = std::max<int64_t>(1, n);
        int64_t need = static_cast<int64_t>(want - after.size()) * per_slot;
        auto room = [&](uint32_t n) { return pool_.avail(n, r.scan_type, start_, end_, ignore_use_); };
        std::stable_sort(nodes.begin(), nodes.end(), [&](uint32_t a, uint32_t b) {
            bool fa = room(a) >= need, fb = room(b) >= need;
            if (fa != fb)
                return fa;
            return fa ? room(a) < room(b) : room(a) > room(b);
        });
        for (uint32_t n : nodes) {
            if (after.size() >= want)
                break;
            add_below(n, want);
        }
        return;
    }
    // CPU- and memory-bound: one slot per node in turn, so the slots are
    // spread evenly over as many nodes as can take them.
    while (after.size() < want && !nodes.empty()) {
        std::vector<uint32_t> still;
        for (uint32_t n : nodes) {
            if (after.size() >= want)
                break;
            if (add_below(n, after.size() + 1))
                still.push_back(n);
        }
        nodes = std::move(still);
    }
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
    // A vertex the job asked to have alone, or a node the policy gives
    // whole, is all the job's: everything under it is listed (its R names
    // every core). Inside a slot the rest of the vertex is only held, as
    // Fluxion does.
    if (x)
        exclusives_.emplace_back(u, r.exclusive || (is_node && policy_.node_exclusive));
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
    if (policy_.order == MatchPolicy::Order::most_free) {
        // Fluxion's order: by weight (update_first_weights), and on a tie
        // the later child in graph order. Children no job has touched
        // weigh most, so they come first without a sort.
        std::vector<std::pair<uint64_t, uint32_t>> touched;
        for (size_t i = kids.size(); i-- > 0;) {
            uint32_t u = kids[i];
            uint64_t weight = ignore_use_ ? 0 : first_weight_[u];
            if (weight != kUntouched)
                touched.emplace_back(weight, u);
            else if (!visit(u))
                return;
        }
        std::sort(touched.begin(), touched.end(), std::greater<>());
        for (auto [weight, u] : touched)
            if (!visit(u))
                return;
        return;
    }
    bool high = policy_.order == MatchPolicy::Order::high;
    std::span<const uint64_t> bits;
    if (!ignore_use_ && start_ == now_ && v != kNoVertex)
        bits = pool_.free_children(v, t);
    if (!bits.empty()) {
        // Only the children with something of type t free now (and, with
        // a constraint, a node below them that meets it).
        const std::vector<uint64_t>* eligible = eligible_children(v);
        for (size_t i = 0; i < bits.size(); ++i) {
            size_t w = high ? bits.size() - 1 - i : i;
            for (uint64_t m = bits[w] & (eligible ? (*eligible)[w] : ~uint64_t{0}); m;) {
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
