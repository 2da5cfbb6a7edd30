#include "sched/match_policy.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "sched/planner.hpp"

namespace banyan {

namespace {

// pack, low, high, lonode, hinode, lonodex, hinodex: by id, lowest or
// highest first, at every level. Only the children with something of the
// type free now are tried, where the parent keeps a bitmap of them.
class ById final : public MatchPolicy {
  public:
    ById(std::string_view name, Traits traits, bool high_first) : MatchPolicy(name, traits), high_(high_first) {}

    void visit_in_order(const Siblings& s, VisitChild visit) const override {
        std::span<const uint64_t> bits = s.free_now;
        if (!bits.empty()) {
            for (size_t i = 0; i < bits.size(); ++i) {
                size_t w = high_ ? bits.size() - 1 - i : i;
                for (uint64_t m = bits[w] & (s.eligible ? (*s.eligible)[w] : ~uint64_t{0}); m;) {
                    int b = high_ ? 63 - std::countl_zero(m) : std::countr_zero(m);
                    m &= ~(uint64_t{1} << b);
                    if (!visit(s.kids[w * 64 + static_cast<size_t>(b)]))
                        return;
                }
            }
            return;
        }
        if (high_) {
            for (size_t i = s.kids.size(); i-- > 0;)
                if (!visit(s.kids[i]))
                    return;
        } else {
            for (uint32_t u : s.kids)
                if (!visit(u))
                    return;
        }
    }

    bool by_id_before(int64_t a, int64_t b) const override { return high_ ? a > b : a < b; }

  private:
    bool high_;
};

// locality: best fit. The children that can hold all that is wanted,
// tightest first; then the others, fullest first, so the job spans as few
// subtrees as it can.
class Locality final : public MatchPolicy {
  public:
    Locality() : MatchPolicy("locality", {}) {}

    void visit_in_order(const Siblings& s, VisitChild visit) const override {
        std::vector<std::pair<int64_t, uint32_t>> scored;
        for (uint32_t u : s.kids)
            if (int64_t a = s.pool.avail(u, s.type, s.start, s.end, s.ignore_use); a > 0)
                scored.emplace_back(a >= s.want ? a : kForever - a, u);
        std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        for (auto [score, u] : scored)
            if (!visit(u))
                return;
    }
};

// first, Fluxion's default: at each level the child with the most free
// now first (as weighed when the last job took something below it), the
// later sibling on a tie; the first fit is taken. A fresh graph is thus
// walked from the highest ids, and jobs spread over the nodes.
class MostFree final : public MatchPolicy {
  public:
    MostFree() : MatchPolicy("first", {}) {}

    void visit_in_order(const Siblings& s, VisitChild visit) const override {
        // Children no job has touched weigh most, so they come first
        // without a sort. Only those that may be tried are looked at: under
        // the job's constraint, and with something free now where the
        // parent keeps that bitmap (a word at a time, as ById): the walk
        // would turn the others away, in the same order.
        std::vector<std::pair<uint64_t, uint32_t>> touched;
        size_t words = (s.kids.size() + 63) / 64;
        for (size_t w = words; w-- > 0;) {
            uint64_t m = s.free_now.empty() ? ~uint64_t{0} : s.free_now[w];
            if (s.eligible)
                m &= (*s.eligible)[w];
            if (size_t tail = s.kids.size() % 64; tail && w == words - 1)
                m &= (uint64_t{1} << tail) - 1;
            while (m) {
                int b = 63 - std::countl_zero(m);
                m &= ~(uint64_t{1} << b);
                uint32_t u = s.kids[w * 64 + static_cast<size_t>(b)];
                uint64_t weight = s.ignore_use ? 0 : weight_[u];
                if (weight != kUntouched)
                    touched.emplace_back(weight, u);
                else if (!visit(u))
                    return;
            }
        }
        std::sort(touched.begin(), touched.end(), std::greater<>());
        for (auto [weight, u] : touched)
            if (!visit(u))
                return;
    }

    void matched(const ResourcePool& pool, std::span<const Claim> claims) override {
        // As Fluxion's by_outedges: each vertex on the new job's path gets
        // the amount free now below it of the scarcest type it has below
        // (nodes where there are any, else cores); the others keep what
        // they had. Leaves keep no weight. A cancel leaves the weights as
        // they are, as in Fluxion.
        for (const Claim& c : claims) {
            uint32_t v = c.vertex;
            if (!c.shown || pool.is_leaf(v))
                continue;
            bool is_node = node_type_ && pool.type(v) == *node_type_;
            bool nodes_below = node_type_ && pool.total(v, *node_type_) > (is_node ? 1 : 0);
            std::optional<TypeId> t = nodes_below ? node_type_ : core_type_;
            weight_[v] = t ? static_cast<uint64_t>(std::max<int64_t>(0, pool.unmatched_now(v, *t))) : 0;
        }
    }

    void graph_changed(const ResourcePool& pool) override {
        weight_.assign(pool.size(), kUntouched);
        node_type_ = pool.find_type("node");
        core_type_ = pool.find_type("core");
    }

  private:
    static constexpr uint64_t kUntouched = UINT64_MAX;
    std::optional<TypeId> node_type_, core_type_;  // of the graph, looked up once
    std::vector<uint64_t> weight_;                 // per vertex, its order weight among its siblings
};

}  // namespace

const std::vector<std::string>& MatchPolicy::names() {
    static const std::vector<std::string> all{"pack",   "first",   "low",     "high",    "lonode",
                                              "hinode", "lonodex", "hinodex", "locality"};
    return all;
}

Result<std::unique_ptr<MatchPolicy>> MatchPolicy::create(std::string_view name) {
    // Fluxion's names (doc/spec/sched.md section 4), and Banyan's `pack`:
    // lonode's walk with slots that may span a node's sockets.
    if (name == "first")
        return std::unique_ptr<MatchPolicy>(std::make_unique<MostFree>());
    if (name == "locality")
        return std::unique_ptr<MatchPolicy>(std::make_unique<Locality>());
    struct ByIdEntry {
        std::string_view name;
        bool high_first;
        Traits traits;
    };
    static const ByIdEntry kById[] = {
        {"pack", false, {.slot_at_holder = false}},
        {"low", false, {.scores_by_id = true}},
        {"high", true, {.scores_by_id = true}},
        {"lonode", false, {}},
        {"hinode", true, {}},
        {"lonodex", false, {.node_exclusive = true}},
        {"hinodex", true, {.node_exclusive = true}},
    };
    for (const auto& e : kById)
        if (e.name == name)
            return std::unique_ptr<MatchPolicy>(std::make_unique<ById>(e.name, e.traits, e.high_first));
    return make_error(EINVAL, fmt::format("unknown match policy '{}' (known: {})", name, fmt::join(names(), ", ")));
}

}  // namespace banyan
