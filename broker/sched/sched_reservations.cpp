// sched.reserve and sched.unreserve: the reservation service's advance
// reservations, kept in the matcher's planners (doc/spec/reservations.md
// §4, sched.md §10).
#include <fmt/format.h>

#include "broker/sched/sched_service.hpp"
#include "core/hostlist.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"

namespace banyan {

namespace {

// The nodes a request names by host: each rank whose node has one of the
// names. Error ENOENT names a host the graph lacks.
Result<IdSet> ranks_of_hosts(const ResourcePool& pool, const std::string& text) {
    auto hosts = HostList::parse(text);
    if (!hosts)
        return make_error(EINVAL, "hostlist: " + hosts.error().message);
    std::map<std::string, IdSet> by_name;
    for (const auto& [rank, v] : pool.nodes_by_rank())
        by_name[pool.name(v)].insert(static_cast<uint32_t>(rank));
    IdSet ranks;
    for (const std::string& host : *hosts) {
        auto it = by_name.find(host);
        if (it == by_name.end())
            return make_error(ENOENT, fmt::format("unknown node '{}'", host));
        ranks = ranks.union_with(it->second);
    }
    return ranks;
}

}  // namespace

void SchedService::on_reserve(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    const nlohmann::json& p = *body;
    auto name = json_field<std::string>(p, "name", "", req.topic);
    auto start = json_field<int64_t>(p, "start", 0, req.topic);
    auto end = json_field<int64_t>(p, "end", 0, req.topic);
    auto ranks = json_field<std::string>(p, "ranks", "", req.topic);
    auto hostlist = json_field<std::string>(p, "hostlist", "", req.topic);
    auto count = json_field<int64_t>(p, "nodes", 0, req.topic);
    auto constraint = json_field<nlohmann::json>(p, "constraint", nlohmann::json(), req.topic);
    if (auto e = first_error(name, start, end, ranks, hostlist, count, constraint))
        return broker_.respond_error(req, EPROTO, e->message);
    if (name->empty())
        return broker_.respond_error(req, EINVAL, "a reservation needs a name");
    if (*end <= *start)
        return broker_.respond_error(req, EINVAL, "a reservation must end after it starts");
    if (*count < 0)
        return broker_.respond_error(req, EINVAL, fmt::format("nodes {}: expected at least 1", *count));
    size_t selections = !ranks->empty() + !hostlist->empty() + (*count > 0 || !constraint->is_null());
    if (selections != 1 || (!ranks->empty() && !constraint->is_null()))
        return broker_.respond_error(req, EINVAL, "give the nodes by count (with a constraint or not), by host "
                                                  "list, or by constraint: one of them");
    AdvanceReservations::Selection selection;
    selection.count = static_cast<size_t>(*count);
    if (!ranks->empty()) {
        auto parsed = IdSet::parse(*ranks);
        if (!parsed)
            return broker_.respond_error(req, EINVAL, "ranks: " + parsed.error().message);
        selection.ranks = *parsed;
    } else if (!hostlist->empty()) {
        auto found = ranks_of_hosts(matcher_->pool(), *hostlist);
        if (!found)
            return broker_.respond_error(req, found.error().code, found.error().message);
        selection.ranks = *found;
    }
    if (!constraint->is_null()) {
        auto c = Constraint::from_json(*constraint, "constraint");
        if (!c)
            return broker_.respond_error(req, EINVAL, c.error().message);
        selection.constraint = std::move(*c);
    }
    // The pass's plans for pending jobs are not in the way of a node
    // chosen by count: the next pass makes them again around it.
    for (auto& lane : lanes_)
        lane.queue->drop_reservations();
    AdvanceReservations& reservations = matcher_->reservations();
    auto chosen = reservations.choose(selection, *start, *end);
    if (!chosen)
        return broker_.respond_error(req, chosen.error().code, chosen.error().message);
    if (auto added = reservations.add({*name, *start, *end, *chosen}); !added)
        return broker_.respond_error(req, added.error().code, added.error().message);
    HostList hosts;
    chosen->for_each([&](uint32_t rank) {
        if (auto v = matcher_->pool().node_of_rank(static_cast<int32_t>(rank)))
            hosts.append(matcher_->pool().name(*v));
    });
    feasible_.clear();  // a job naming it may fit now, one naming its nodes not
    feasible_bytes_ = 0;
    log::info("sched", "reservation {}: ranks {} from {} to {}", *name, chosen->format(), *start, *end);
    broker_.respond(Message::response_to(req, {{"ranks", chosen->format()}, {"hosts", hosts.format()}}));
    schedule_soon();
}

void SchedService::on_unreserve(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto name = json_field<std::string>(*body, "name", "", req.topic);
    auto why = json_field<std::string>(*body, "why", "ended", req.topic);
    if (auto e = first_error(name, why))
        return broker_.respond_error(req, EPROTO, e->message);
    if (auto removed = matcher_->reservations().remove(*name); !removed)
        return broker_.respond_error(req, removed.error().code, removed.error().message);
    // Jobs waiting to run in it never will: each alloc is answered.
    std::string reason = fmt::format("reservation {} {}", *name, *why);
    for (auto& lane : lanes_) {
        std::vector<uint64_t> inside;
        for (const PendingJob* job : lane.queue->pending())
            if (job->jobspec.reservation == *name)
                inside.push_back(job->id);
        for (uint64_t id : inside) {
            (void)lane.queue->cancel(id);
            lane_index_.erase(id);
            if (auto it = waiting_.find(id); it != waiting_.end()) {
                broker_.respond_error(it->second, ENOENT, reason);
                waiting_.erase(it);
            }
        }
    }
    feasible_.clear();
    feasible_bytes_ = 0;
    log::info("sched", "{}", reason);
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    schedule_soon();
}

}  // namespace banyan
