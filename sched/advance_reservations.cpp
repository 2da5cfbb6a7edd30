#include "sched/advance_reservations.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/duration.hpp"

namespace banyan {

Result<IdSet> AdvanceReservations::choose(const Selection& selection, int64_t start, int64_t end) const {
    if (selection.ranks) {
        for (uint32_t rank : selection.ranks->ids())
            if (!pool_.node_of_rank(static_cast<int32_t>(rank)))
                return make_error(ENOENT, fmt::format("rank {}: no such node", rank));
        return *selection.ranks;
    }
    // Ranks in ascending order: the same request picks the same nodes.
    std::vector<std::pair<int32_t, uint32_t>> nodes(pool_.nodes_by_rank().begin(), pool_.nodes_by_rank().end());
    std::sort(nodes.begin(), nodes.end());
    IdSet meeting, chosen;
    for (const auto& [rank, v] : nodes) {
        if (selection.constraint && !selection.constraint->match(pool_.name(v), rank, [&](std::string_view p) {
                return pool_.has_property(v, p);
            }))
            continue;
        meeting.insert(static_cast<uint32_t>(rank));
        if (selection.count == 0 || chosen.count() == selection.count)
            continue;
        if (pool_.up(v) && pool_.subtree_idle(v, start, end) && !first_meeting_on(v, start, end))
            chosen.insert(static_cast<uint32_t>(rank));
    }
    if (meeting.empty())
        return make_error(ENOSPC, selection.constraint
                                      ? fmt::format("no node satisfies '{}'", selection.constraint->describe())
                                      : std::string("the resource graph has no nodes"));
    if (selection.count == 0)
        return meeting;
    if (chosen.count() < selection.count)
        return make_error(ENOSPC, fmt::format("only {} of the {} node{} asked for {} free for the whole window",
                                              chosen.count(), selection.count, selection.count == 1 ? "" : "s",
                                              chosen.count() == 1 ? "is" : "are"));
    return chosen;
}

const AdvanceReservation* AdvanceReservations::first_meeting_on(uint32_t node, int64_t start, int64_t end) const {
    int32_t rank = pool_.rank(node);
    for (const auto& [name, held] : held_) {
        const AdvanceReservation& r = held.reservation;
        if (r.start < end && start < r.end && rank >= 0 && r.ranks.contains(static_cast<uint32_t>(rank)))
            return &r;
    }
    return nullptr;
}

Result<void> AdvanceReservations::add(AdvanceReservation reservation) {
    if (held_.count(reservation.name))
        return make_error(EEXIST, fmt::format("a reservation named '{}' exists", reservation.name));
    for (uint32_t rank : reservation.ranks.ids()) {
        auto v = pool_.node_of_rank(static_cast<int32_t>(rank));
        if (!v)
            return make_error(ENOENT, fmt::format("rank {}: no such node", rank));
        if (const AdvanceReservation* other = first_meeting_on(*v, reservation.start, reservation.end))
            return make_error(EBUSY, fmt::format("node {} is in reservation {} from {} to {}", pool_.name(*v),
                                                 other->name, format_moment(static_cast<double>(other->start)),
                                                 format_moment(static_cast<double>(other->end))));
    }
    Held held{std::move(reservation), {}, {}};
    held.nodes = nodes_of(held.reservation.ranks);
    // Jobs that run on its nodes into its window already (restored before
    // it, or there when it was made): what they hold is not planned twice.
    for (const auto& [id, a] : table_.all())
        if (!inside(held, a).empty())
            held.jobs.insert(id);
    apply(held, 1);
    std::string name = held.reservation.name;
    held_.emplace(std::move(name), std::move(held));
    return {};
}

void AdvanceReservations::carve(uint64_t jobid) {
    const Allocation* a = table_.find(jobid);
    if (!a || a->reserved)
        return;
    for (auto& [name, held] : held_)
        if (!held.jobs.count(jobid) && !inside(held, *a).empty()) {
            held.jobs.insert(jobid);
            apply_carve(held, *a, -1);
        }
}

void AdvanceReservations::uncarve(uint64_t jobid, const Allocation& a) {
    for (auto& [name, held] : held_)
        if (held.jobs.erase(jobid))
            apply_carve(held, a, 1);
}

std::vector<Claim> AdvanceReservations::inside(const Held& held, const Allocation& a) const {
    // Only consuming claims on the reservation's nodes, over a window that
    // meets its own: the shared vertices above them (a rack) are not the
    // reservation's.
    std::vector<Claim> claims;
    if (a.reserved || std::max(a.start, held.reservation.start) >= std::min(a.end, held.reservation.end))
        return claims;
    for (const Claim& c : a.claims) {
        int32_t rank = pool_.rank(c.vertex);
        if (c.consumes && rank >= 0 && held.reservation.ranks.contains(static_cast<uint32_t>(rank)))
            claims.push_back(c);
    }
    return claims;
}

void AdvanceReservations::apply_carve(const Held& held, const Allocation& a, int sign) {
    int64_t start = std::max(a.start, held.reservation.start);
    int64_t end = std::min(a.end, held.reservation.end);
    pool_.apply(inside(held, a), start, end, false, sign);
}

Result<void> AdvanceReservations::remove(const std::string& name) {
    auto it = held_.find(name);
    if (it == held_.end())
        return make_error(ENOENT, fmt::format("no reservation named '{}'", name));
    apply(it->second, -1);
    held_.erase(it);
    return {};
}

const AdvanceReservation* AdvanceReservations::find(const std::string& name) const {
    auto it = held_.find(name);
    return it == held_.end() ? nullptr : &it->second.reservation;
}

Result<void> AdvanceReservations::confine(Jobspec& jobspec) const {
    if (jobspec.reservation.empty())
        return {};
    const AdvanceReservation* in = find(jobspec.reservation);
    if (!in)
        return make_error(ENOENT, fmt::format("no reservation named '{}'", jobspec.reservation));
    nlohmann::json mine = {{"ranks", nlohmann::json::array({in->ranks.format()})}};
    nlohmann::json both = {{"and", nlohmann::json::array({mine})}};
    if (jobspec.constraint)
        both["and"].push_back(jobspec.constraint->to_json());
    auto constraint = Constraint::from_json(both);
    if (!constraint)
        return constraint.error();
    jobspec.constraint = std::move(*constraint);
    return {};
}

void AdvanceReservations::add_ends_after(int64_t after, std::vector<int64_t>& times) const {
    for (const auto& [name, held] : held_)
        if (held.reservation.end > after)
            times.push_back(held.reservation.end);
}

const AdvanceReservation* AdvanceReservations::first_meeting(int64_t start, int64_t end) const {
    const AdvanceReservation* first = nullptr;
    for (const auto& [name, held] : held_) {
        const AdvanceReservation& r = held.reservation;
        if (r.start < end && start < r.end && (!first || r.start < first->start))
            first = &r;
    }
    return first;
}

std::vector<uint32_t> AdvanceReservations::nodes_of(const IdSet& ranks) const {
    std::vector<uint32_t> nodes;
    ranks.for_each([&](uint32_t rank) {
        if (auto node = pool_.node_of_rank(static_cast<int32_t>(rank)))
            nodes.push_back(*node);
    });
    return nodes;
}

void AdvanceReservations::apply(const Held& held, int sign) {
    for (uint32_t node : held.nodes)
        pool_.plan_whole(node, held.reservation.start, held.reservation.end, sign);
    for (uint64_t id : held.jobs)
        if (const Allocation* a = table_.find(id))
            apply_carve(held, *a, -sign);
}

void AdvanceReservations::apply_named(const std::optional<std::string>& name, int sign) {
    for (const auto& [n, held] : held_)
        if (!name || n == *name)
            apply(held, sign);
}

AdvanceReservations::Lift::Lift(AdvanceReservations& owner, std::optional<std::string> name)
    : owner_(owner), name_(std::move(name)) {
    owner_.apply_named(name_, -1);
}

AdvanceReservations::Lift::~Lift() {
    owner_.apply_named(name_, 1);
}

void AdvanceReservations::reapply() {
    for (auto& [name, held] : held_) {
        held.nodes = nodes_of(held.reservation.ranks);
        std::erase_if(held.jobs, [&](uint64_t id) { return !table_.find(id); });  // lost in the move
        apply(held, 1);
    }
}

}  // namespace banyan
