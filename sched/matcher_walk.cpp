#include <algorithm>
#include <limits>

#include "sched/matcher.hpp"

namespace banyan {

namespace {

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
    if (policy_->traits().slot_at_holder && policy_->traits().scores_by_id)
        return collect_slots_by_score(v, r, want, after);
    // As in Fluxion, a slot lies at the first vertex that has every type
    // of the slot directly beneath it, and takes its members from those
    // children only: a slot of cores and memory stays within one socket.
    // Banyan's `pack` takes a slot's members anywhere below one node (all
    // its sockets), never from two: a task runs on one node.
    bool at_slot = policy_->traits().slot_at_holder ? holds_slot_members(v, r) : at_or_below_a_node(v, r);
    if (at_slot) {
        bool direct = policy_->traits().slot_at_holder;
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
        bool node_x = policy_->traits().node_exclusive && is_node(u);
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
    if (policy_->traits().scores_by_id && !direct)
        return collect_by_id(v, r, want, exclusive);
    return collect_in_order(v, r, want, exclusive, direct);
}

int64_t Matcher::collect_in_order(uint32_t v, const Request& r, int64_t want, bool exclusive, bool direct) {
    int64_t found = 0;
    for_each_child(v, r.scan_type, want, [&](uint32_t u) {
        ++visits_;
        if (!usable(u) || taken_for(u, r))
            return true;
        if (pool_.type(u) == r.type) {
            if (r.leaf) {
                found += take_from_pool(u, r, want - found, exclusive, direct && !share_pools_);
            } else if (claim_unit(u, r, exclusive)) {
                ++found;
            }
        } else if (!direct && may_hold(u, r.unit_needs)) {
            bool first_visit = marked_[u] != epoch_;
            bool node_x = policy_->traits().node_exclusive && is_node(u);
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
                return is_node(u);
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
        if (!usable(u) || taken_for(u, r))
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
                     [&](uint32_t a, uint32_t b) { return policy_->by_id_before(pool_.id(a), pool_.id(b)); });
    int64_t found = 0;
    for (uint32_t u : candidates) {
        if (found >= want)
            break;
        if (r.leaf) {
            int64_t take = take_from_pool(u, r, want - found, exclusive);
            if (take == 0)
                continue;
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
                     [&](const Scored& a, const Scored& b) { return policy_->by_id_before(a.score, b.score); });
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
            if (policy_->traits().node_exclusive) {
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
    bool whole_node = policy_->traits().node_exclusive && is_node(u);
    bool x = exclusive || r.exclusive || whole_node;
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
        exclusives_.emplace_back(u, r.exclusive || whole_node);
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
                push_claim({d, amount, true, true, show, false});
                continue;
            }
            Claim& c = claims_[claim_of_[d]];
            if (!c.consumes) {
                c.consumes = c.exclusive = true;
            } else if (int64_t held = claimed_here(d); held < amount) {
                // The rest of a memory pool the job took part of: held, not shown.
                push_claim({d, amount - held, true, true, false, false});
            }
        }
    }
}

void Matcher::for_each_child(uint32_t v, TypeId t, int64_t want, VisitChild visit) {
    std::span<const uint64_t> free_now;
    if (!ignore_use_ && start_ == now_ && v != kNoVertex)
        free_now = pool_.free_children(v, t);
    // With a constraint, the children with an eligible node below them,
    // where v keeps bitmaps of its children (made once per constraint).
    const std::vector<uint64_t>* eligible = free_now.empty() ? nullptr : eligibility_.children(v);
    Siblings siblings{.pool = pool_,
                      .parent = v,
                      .kids = v == kNoVertex ? pool_.roots() : pool_.children(v),
                      .type = t,
                      .want = want,
                      .start = start_,
                      .end = end_,
                      .ignore_use = ignore_use_,
                      .free_now = free_now,
                      .eligible = eligible};
    policy_->visit_in_order(siblings, visit);
}

void Matcher::next_epoch() {
    if (++epoch_ == 0) {
        std::fill(marked_.begin(), marked_.end(), 0);
        std::fill(taken_.begin(), taken_.end(), 0);
        epoch_ = 1;
    }
    claims_.clear();
    prior_claim_.clear();
    exclusives_.clear();
}

void Matcher::push_claim(const Claim& c) {
    prior_claim_.push_back(marked_[c.vertex] == epoch_ ? claim_of_[c.vertex] : kNoClaim);
    marked_[c.vertex] = epoch_;
    claim_of_[c.vertex] = static_cast<uint32_t>(claims_.size());
    claims_.push_back(c);
}

void Matcher::rollback(Checkpoint cp) {
    for (size_t i = claims_.size(); i-- > cp.claims;) {
        uint32_t v = claims_[i].vertex;
        if (prior_claim_[i] != kNoClaim) {
            claim_of_[v] = prior_claim_[i];  // an earlier claim of the same pool stays
            continue;
        }
        marked_[v] = 0;
        taken_[v] = 0;
    }
    claims_.resize(cp.claims);
    prior_claim_.resize(cp.claims);
    exclusives_.resize(cp.exclusives);
}

int64_t Matcher::claimed_here(uint32_t u) const {
    int64_t sum = 0;
    if (marked_[u] == epoch_)
        for (uint32_t i = claim_of_[u]; i != kNoClaim; i = prior_claim_[i])
            sum += claims_[i].amount;
    return sum;
}

int64_t Matcher::take_from_pool(uint32_t u, const Request& r, int64_t want, bool exclusive, bool whole) {
    if (marked_[u] == epoch_ && !share_pools_)
        return 0;
    int64_t free = pool_.avail(u, r.type, start_, end_, ignore_use_) - claimed_here(u);
    int64_t take = whole ? free : std::min(free, want);
    if (take <= 0)
        return 0;
    push_claim({u, take, exclusive || r.exclusive, true, true});
    taken_[u] = epoch_;
    return take;
}

}  // namespace banyan
