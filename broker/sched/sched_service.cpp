#include "broker/sched/sched_service.hpp"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "core/client.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"
#include "sched/preemption.hpp"

namespace banyan {

namespace {

// Jobspecs remembered as feasible: at most this many bytes of them (a
// command line can be long).
constexpr size_t kMaxFeasibleBytes = 1 << 20;

int64_t wall_now() {
    return static_cast<int64_t>(std::time(nullptr));
}

// {"id": N} from a request, with the error naming what is wrong.
Result<uint64_t> job_id(const nlohmann::json& payload, std::string_view topic) {
    if (!payload.contains("id"))
        return make_error(EPROTO, fmt::format("{}: expected {{\"id\": JOBID, ...}}", topic));
    return json_field<uint64_t>(payload, "id", 0, topic);
}

}  // namespace

Result<std::unique_ptr<SchedService>> SchedService::start(Broker& broker) {
    std::unique_ptr<SchedService> svc(new SchedService(broker));
    const Config& config = broker.bootstrap().config;
    auto named = [&](std::string_view key, auto parse,
                     std::string fallback) -> Result<std::decay_t<decltype(*parse(""))>> {
        auto text = config.get_string(key, fallback);
        if (!text)
            return text.error();
        auto value = parse(*text);
        if (!value)
            return make_error(EINVAL, fmt::format("{}: {}: {}", config.source(), key, value.error().message));
        return std::move(*value);
    };
    // EASY backfill by default, as Slurm and Fluxion deployments: an idle core
    // that a short job could use while a wide one waits is not left idle
    // (doc/spec/sched.md §5).
    auto qp = named("sched.queue-policy", queue_policy_from_name, "easy");
    if (!qp)
        return qp.error();
    auto mp = named("sched.match-policy", MatchPolicy::create, "pack");
    if (!mp)
        return mp.error();
    auto depth = config.get_int("sched.queue-depth", 1, 1'000'000, 1000);
    if (!depth)
        return depth.error();
    auto rdepth = config.get_int("sched.reservation-depth", 1, 100'000, 64);
    if (!rdepth)
        return rdepth.error();
    auto queues = NamedQueues::read(config, *qp);
    if (!queues)
        return queues.error();
    svc->match_policy_ = std::move(*mp);
    svc->queue_config_ = {*qp, static_cast<size_t>(*depth), static_cast<size_t>(*rdepth), 60};
    svc->named_ = std::move(*queues);
    if (broker.bootstrap().rank == 0) {
        auto states = QueueStates::open(broker.reactor(), broker.bootstrap().statedir, QueueStates::Kind::stopped,
                                        svc->stopped_at_start_);
        if (!states)
            return states.error();
        svc->queue_states_ = std::move(*states);
        svc->register_methods();
        broker.when_running([s = svc.get()] { s->acquire_resources(); });
    }
    return svc;
}

void SchedService::register_methods() {
    auto method = [&](const char* topic, void (SchedService::*fn)(const Message&)) {
        broker_.register_method(topic, true,
                                broker_.at_rank0(with_graph([this, fn](const Message& r) { (this->*fn)(r); })));
    };
    method("sched.alloc", &SchedService::on_alloc);
    method("sched.free", &SchedService::on_free);
    method("sched.cancel", &SchedService::on_cancel);
    method("sched.prioritize", &SchedService::on_prioritize);
    method("sched.extend", &SchedService::on_extend);
    method("sched.hello", &SchedService::on_hello);
    method("sched.reserve", &SchedService::on_reserve);
    method("sched.unreserve", &SchedService::on_unreserve);
    broker_.register_method("sched.queue", false,
                            broker_.at_rank0(with_graph([this](const Message& r) { on_queue(r); })));
    broker_.register_method("sched.queue-list", false,
                            broker_.at_rank0(with_graph([this](const Message& r) { on_queue_list(r); })));
    method("sched.queue-start", &SchedService::on_queue_start);
    broker_.register_method("sched.stats", true, broker_.at_rank0([this](const Message& r) {
        broker_.respond(Message::response_to(r, {{"pass", pass_seconds_.to_json()}}));
    }));
    // Not held back until the graph is there: a submission never waits
    // for it (before it, every job is taken, and sched.alloc decides).
    broker_.register_method("sched.feasibility", true,
                            broker_.at_rank0([this](const Message& r) { on_feasibility(r); }));
    // Not held back until the graph is there: nothing is allocated before.
    broker_.register_method("sched.resource-status", false,
                            broker_.at_rank0([this](const Message& r) { on_resource_status(r); }));
}

Broker::Handler SchedService::with_graph(Broker::Handler handle) {
    return [this, handle](const Message& req) {
        if (!lanes_.empty())
            handle(req);
        else
            early_.emplace_back(handle, req);
    };
}

void SchedService::acquire_resources() {
    Message request = Message::request("resource.acquire", nlohmann::json::object(), 0);
    request.flags |= msgflag::streaming;
    broker_.rpc(std::move(request), [this](const Message& resp) { on_resources(resp); });
}

void SchedService::on_resources(const Message& resp) {
    auto body = response_payload(resp);
    if (!body) {
        // Only a broker shutting down ends the stream.
        log::error("sched", "resource.acquire ended: {}", body.error().message);
        return;
    }
    auto drained = json_field<std::string>(*body, "drained", "", resp.topic);
    auto down = json_field<std::string>(*body, "down", "", resp.topic);
    auto drained_ranks = drained ? IdSet::parse(*drained) : Result<IdSet>(drained.error());
    auto down_ranks = down ? IdSet::parse(*down) : Result<IdSet>(down.error());
    if (!drained_ranks || !down_ranks) {
        log::error("sched", "resource.acquire: {}", (!drained_ranks ? drained_ranks : down_ranks).error().message);
        return;
    }
    if (body->contains("graph")) {
        auto graph = ResourceGraph::from_jgf(body->at("graph"));
        if (!graph) {
            log::error("sched", "cannot load the resource graph: {}", graph.error().message);
            return;
        }
        if (!matcher_) {
            matcher_ = std::make_unique<Matcher>(*graph, std::move(match_policy_));
            // A node's tasks share its memory pools (--mem, sched.md §4).
            matcher_->share_pools(true);
            // One lane per named queue, or one unnamed lane.
            std::vector<NamedQueue> configs = named_.queues;
            if (configs.empty())
                configs.push_back(NamedQueue{.policy = queue_config_.policy});
            // Highest tier first: what comes free goes to it first (§9).
            std::stable_sort(configs.begin(), configs.end(), [](const NamedQueue& a, const NamedQueue& b) {
                return a.priority_tier > b.priority_tier;
            });
            for (auto& c : configs) {
                Lane lane;
                QueueConfig qc = queue_config_;
                qc.policy = c.policy;
                lane.queue = std::make_unique<SchedQueue>(*matcher_, qc);
                if (c.constraint)
                    lane.nodes = *Constraint::from_json(*c.constraint);  // checked when the config was read
                // Stopped before a restart: stopped still.
                if (auto stopped = stopped_at_start_.find(c.name); stopped != stopped_at_start_.end()) {
                    lane.started = false;
                    lane.stop_reason = stopped->second;
                    stopped_at_start_.erase(stopped);
                    log::info("sched", "queue {} is stopped{}{}", c.name, lane.stop_reason.empty() ? "" : ": ",
                              lane.stop_reason);
                }
                lane.config = std::move(c);
                lanes_.push_back(std::move(lane));
            }
            for (const auto& [name, reason] : std::exchange(stopped_at_start_, {}))
                log::warning("sched", "queue {} was stopped but is not configured now; ignored", name);
            log::info("sched", "{} vertices; {} queue{}, queue policy {}, match policy {}", matcher_->pool().size(),
                      lanes_.size(), lanes_.size() == 1 ? "" : "s",
                      queue_config_.policy == QueuePolicy::fcfs   ? "fcfs"
                      : queue_config_.policy == QueuePolicy::easy ? "easy"
                                                                  : "conservative",
                      matcher_->policy().name());
        } else {
            feasible_.clear();
            feasible_bytes_ = 0;
            for (auto& lane : lanes_)
                lane.queue->drop_reservations();
            for (uint64_t id : lanes_.front().queue->reload(*graph))
                log::warning("sched", "job {}: its resources are no longer in the graph", id);
            log::info("sched", "the graph changed: {} vertices", matcher_->pool().size());
        }
    }
    if (!matcher_)
        return;
    matcher_->set_node_states(*drained_ranks, *down_ranks);
    log::debug("sched", "drained {}, down {}", *drained, *down);
    // Not inside the resource service's call: a handler that fails would
    // answer its error into the acquire stream.
    if (!early_.empty())
        broker_.reactor().post([this, early = std::exchange(early_, {})] {
            for (const auto& [handle, req] : early)
                handle(req);
        });
    schedule_soon();
}

void SchedService::on_resource_status(const Message& req) {
    Rv1 allocated = matcher_ ? matcher_->allocated() : Rv1{};
    broker_.respond(Message::response_to(req, {{"allocated", allocated.to_json()}}));
}

namespace {

// RFC 25 lets a leaf ask for none (`gpu: count 0`): it asks for nothing,
// and the matcher is not asked for it.
void drop_zero_counts(std::vector<JobspecResource>& resources) {
    std::erase_if(resources, [](const JobspecResource& r) {
        return r.with.empty() && r.count.min == 0 && r.count.max.value_or(0) == 0 && r.count.values.empty();
    });
    for (auto& r : resources)
        drop_zero_counts(r.with);
}

}  // namespace

// The jobspec of sched.alloc or sched.feasibility, with its queue's node
// constraint joined to its own, and the lane it goes to.
Result<std::pair<SchedService::Lane*, Jobspec>> SchedService::lane_and_jobspec(const nlohmann::json& p,
                                                                               std::string_view topic) {
    if (!p.contains("jobspec"))
        return make_error(EPROTO, fmt::format("{}: expected a jobspec", topic));
    // Jobs are version 1 jobspecs, as the job manager checked them (RFC 25).
    auto jobspec = Jobspec::from_json(p["jobspec"], JobspecRules::v1);
    if (!jobspec)
        return make_error(EINVAL, "jobspec: " + jobspec.error().message);
    drop_zero_counts(jobspec->resources);
    auto asked = json_field<std::string>(json_object_at(jobspec->attributes, {"system"}), "queue", "",
                                         "jobspec: attributes.system");
    if (!asked)
        return make_error(EINVAL, asked.error().message);
    auto lane = lane_named(*asked);
    if (!lane)
        return lane.error();
    // The queue's nodes and the job's own constraint, both.
    if ((*lane)->nodes) {
        nlohmann::json both = {{"and", nlohmann::json::array({(*lane)->nodes->to_json()})}};
        if (jobspec->constraint)
            both["and"].push_back(jobspec->constraint->to_json());
        jobspec->constraint = *Constraint::from_json(both);
    }
    // The queue needs resources and duration only; a job's environment can
    // be kilobytes, and many thousands of jobs may wait.
    jobspec->attributes = nullptr;
    jobspec->tasks.clear();
    return std::pair<Lane*, Jobspec>(*lane, std::move(*jobspec));
}

void SchedService::on_alloc(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    const nlohmann::json& p = *body;
    auto id = job_id(p, req.topic);
    if (!id)
        return broker_.respond_error(req, id.error().code, id.error().message);
    auto priority = json_field<int64_t>(p, "priority", 16, req.topic);
    auto t_submit = json_field<double>(p, "t_submit", static_cast<double>(wall_now()), req.topic);
    if (auto e = first_error(priority, t_submit))
        return broker_.respond_error(req, EPROTO, e->message);
    auto found = lane_and_jobspec(p, req.topic);
    if (!found)
        return broker_.respond_error(req, found.error().code, found.error().message);
    auto& [lane, jobspec] = *found;
    if (lane_index_.count(*id))
        return broker_.respond_error(req, EEXIST, fmt::format("job {} is already known to the scheduler", *id));
    if (auto r = lane->queue->submit(*id, std::move(jobspec), *priority, *t_submit); !r)
        return broker_.respond_error(req, r.error().code, r.error().message);
    lane_index_[*id] = static_cast<size_t>(lane - lanes_.data());
    if (!lane->started)
        lane->queue->annotate_pending(stopped_reason(*lane));
    // Kept to answer it: without its payload (the jobspec), which at
    // 100,000 pending jobs would be hundreds of MB.
    Message& kept = waiting_.emplace(*id, req).first->second;
    kept.payload.reset();
    schedule_soon();
}

// sched.feasibility {jobspec}: could the job ever run here (its queue
// known, the graph able to hold it with every node up)? {} or why not,
// as sched.alloc would refuse it; nothing is recorded. The job manager
// asks before it acknowledges a submission (doc/spec/sched.md §7).
void SchedService::on_feasibility(const Message& req) {
    if (lanes_.empty())  // no graph yet
        return broker_.respond(Message::response_to(req, nlohmann::json::object()));
    // Node states do not count here (every node up), so the same jobspec
    // fits until the graph changes.
    static const std::string none;
    const std::string& key = req.payload ? *req.payload : none;
    if (feasible_.count(key))
        return broker_.respond(Message::response_to(req, nlohmann::json::object()));
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto found = lane_and_jobspec(*body, req.topic);
    if (!found)
        return broker_.respond_error(req, found.error().code, found.error().message);
    if (auto confined = matcher_->reservations().confine(found->second); !confined)
        return broker_.respond_error(req, confined.error().code, confined.error().message);
    if (auto fits = matcher_->could_ever_fit(found->second); !fits)
        return broker_.respond_error(req, fits.error().code, fits.error().message);
    if (feasible_bytes_ + key.size() > kMaxFeasibleBytes) {
        feasible_.clear();
        feasible_bytes_ = 0;
    }
    if (feasible_.insert(key).second)
        feasible_bytes_ += key.size();
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
}

void SchedService::on_free(const Message& req) {
    auto body = req.json();
    auto id = body ? job_id(*body, req.topic) : Result<uint64_t>(body.error());
    if (!id)
        return broker_.respond_error(req, id.error().code, id.error().message);
    auto lane = lane_of(*id);
    if (!lane)
        return broker_.respond_error(req, lane.error().code, lane.error().message);
    if (auto r = (*lane)->queue->free(*id); !r)
        return broker_.respond_error(req, r.error().code, r.error().message);
    lane_index_.erase(*id);
    victim_gone(*id);
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    schedule_soon();
}

void SchedService::on_cancel(const Message& req) {
    auto body = req.json();
    auto id = body ? job_id(*body, req.topic) : Result<uint64_t>(body.error());
    if (!id)
        return broker_.respond_error(req, id.error().code, id.error().message);
    auto lane = lane_of(*id);
    if (!lane)
        return broker_.respond_error(req, ENOENT, fmt::format("job {} is not pending", *id));
    if (auto r = (*lane)->queue->cancel(*id); !r)
        return broker_.respond_error(req, r.error().code, r.error().message);
    lane_index_.erase(*id);
    preempting_.erase(*id);  // its victims end all the same
    if (auto it = waiting_.find(*id); it != waiting_.end()) {
        broker_.respond_error(it->second, ECANCELED, fmt::format("job {} was canceled while pending", *id));
        waiting_.erase(it);
    }
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    schedule_soon();
}

// sched.extend {id, end}: a running job's time limit changed (job-manager
// update); it holds its resources until `end` (seconds since the epoch;
// absent: no end), and passes plan with that.
void SchedService::on_extend(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto id = job_id(*body, req.topic);
    auto end = json_field<int64_t>(*body, "end", kForever, req.topic);
    if (auto e = first_error(id, end))
        return broker_.respond_error(req, EPROTO, e->message);
    auto lane = lane_of(*id);
    if (!lane)
        return broker_.respond_error(req, lane.error().code, lane.error().message);
    // (One already past ends at once: the job manager times it out.)
    if (auto r = (*lane)->queue->extend(*id, std::clamp<int64_t>(*end, wall_now() + 1, kForever)); !r)
        return broker_.respond_error(req, r.error().code, r.error().message);
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    schedule_soon();
}

void SchedService::on_prioritize(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto id = job_id(*body, req.topic);
    auto priority = json_field<int64_t>(*body, "priority", 16, req.topic);
    if (auto e = first_error(id, priority))
        return broker_.respond_error(req, EPROTO, e->message);
    auto lane = lane_of(*id);
    if (!lane)
        return broker_.respond_error(req, ENOENT, fmt::format("job {} is not pending", *id));
    if (auto r = (*lane)->queue->prioritize(*id, *priority); !r)
        return broker_.respond_error(req, r.error().code, r.error().message);
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    schedule_soon();
}

// {"jobs": [{"id": N, "R": {...}}]}: jobs that hold resources already.
void SchedService::on_hello(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    const nlohmann::json& p = *body;
    if (!p.contains("jobs") || !p["jobs"].is_array())
        return broker_.respond_error(req, EPROTO, fmt::format("{}: expected {{\"jobs\": [...]}}", req.topic));
    std::vector<std::string> refused;
    for (auto& lane : lanes_)
        lane.queue->drop_reservations();
    for (const auto& j : p["jobs"]) {
        auto id = job_id(j, "jobs[]");
        auto r = id && j.contains("R") ? Rv1::from_json(j["R"]) : Result<Rv1>(make_error(EPROTO, "jobs[]: no R"));
        if (auto e = first_error(id, r)) {
            refused.push_back(e->message);
            continue;
        }
        int64_t start = static_cast<int64_t>(r->starttime);
        int64_t end = r->expiration > 0 ? static_cast<int64_t>(r->expiration) : kForever;
        // Its queue, if it still is one; else the first.
        auto queue = json_field<std::string>(j, "queue", "", "jobs[]");
        auto lane = queue ? lane_named(*queue) : Result<Lane*>(queue.error());
        Lane* home = lane ? *lane : &lanes_.front();
        if (auto done = home->queue->restore(*id, *r, start, end); !done)
            refused.push_back(fmt::format("job {}: {}", *id, done.error().message));
        else
            lane_index_[*id] = static_cast<size_t>(home - lanes_.data());
    }
    broker_.respond(Message::response_to(req, {{"refused", refused}}));
    schedule_soon();
}

void SchedService::on_queue(const Message& req) {
    nlohmann::json jobs = nlohmann::json::array();
    size_t running = 0;
    int64_t now = wall_now();
    for (const auto& lane : lanes_)
        if (lane.started)
            lane.queue->reserve_first_blocked(now);
    for (const auto& lane : lanes_) {
        for (const PendingJob* j : lane.queue->pending()) {
            nlohmann::json entry{{"id", j->id}, {"priority", j->priority}, {"reason", j->shown_reason()}};
            if (j->t_estimate)
                entry["t_estimate"] = *j->t_estimate;
            if (!lane.config.name.empty())
                entry["queue"] = lane.config.name;
            jobs.push_back(std::move(entry));
        }
        running += lane.queue->running();
    }
    broker_.respond(Message::response_to(req, {{"jobs", jobs}, {"running", running}}));
}

void SchedService::on_queue_list(const Message& req) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& lane : lanes_) {
        if (lane.config.name.empty())
            continue;
        nlohmann::json one = {{"name", lane.config.name},
                              {"started", lane.started},
                              {"pending", lane.queue->pending_count()},
                              {"running", lane.queue->running()}};
        if (!lane.started)
            one["stop-reason"] = lane.stop_reason;
        all.push_back(std::move(one));
    }
    broker_.respond(Message::response_to(req, {{"queues", std::move(all)}}));
}

void SchedService::on_queue_start(const Message& req) {
    auto body = req.json();
    auto name = body ? json_field<std::string>(*body, "queue", "", req.topic) : Result<std::string>(body.error());
    auto start = body ? json_field(*body, "start", true, req.topic) : Result<bool>(body.error());
    auto reason = body ? json_field<std::string>(*body, "reason", "", req.topic) : Result<std::string>(body.error());
    if (auto e = first_error(name, start, reason))
        return broker_.respond_error(req, EPROTO, e->message);
    if (named_.empty())
        return broker_.respond_error(req, ENOENT, "this instance has no queues");
    std::vector<Lane*> targets;
    for (auto& lane : lanes_)
        if (name->empty() || *name == "all" || lane.config.name == *name)
            targets.push_back(&lane);
    if (targets.empty())
        return broker_.respond_error(req, ENOENT,
                                     fmt::format("unknown queue '{}' (queues: {})", *name, named_.names()));
    std::vector<std::string> names;
    for (const Lane* lane : targets)
        names.push_back(lane->config.name);
    // Acknowledged once on disk, as a drain: it survives a restart.
    queue_states_->store(names, *start ? std::nullopt : std::optional(*reason),
                         [this, req, names, start = *start, reason = *reason](const Result<void>& stored) {
                             if (!stored)
                                 return broker_.respond_error(req, stored.error().code, stored.error().message);
                             start_queues(names, start, reason);
                             broker_.respond(Message::response_to(req, nlohmann::json::object()));
                             schedule_soon();
                         });
}

// Once on disk (the lanes are looked up by name again: the request's
// pointers are not kept across the write).
void SchedService::start_queues(const std::vector<std::string>& names, bool start, const std::string& reason) {
    for (auto& lane : lanes_) {
        if (std::find(names.begin(), names.end(), lane.config.name) == names.end())
            continue;
        lane.started = start;
        lane.stop_reason = start ? "" : reason;
        // A stopped queue's jobs stay pending, say why, and plan nothing.
        if (!start) {
            lane.queue->drop_reservations();
            lane.queue->annotate_pending(stopped_reason(lane));
        }
        log::info("sched", "queue {} {}{}{}", lane.config.name, start ? "started" : "stopped",
                  reason.empty() ? "" : ": ", reason);
    }
}

std::string SchedService::stopped_reason(const Lane& lane) {
    return fmt::format("queue {} is stopped{}{}", lane.config.name, lane.stop_reason.empty() ? "" : ": ",
                       lane.stop_reason);
}

Result<SchedService::Lane*> SchedService::lane_named(const std::string& queue) {
    if (named_.empty()) {
        if (!queue.empty())
            return make_error(EINVAL, fmt::format("queue '{}': this instance has no queues", queue));
        return &lanes_.front();
    }
    for (auto& lane : lanes_)
        if (lane.config.name == queue)
            return &lane;
    // The job manager refuses unknown queues at submit: this is a job it
    // recovered after its queue left the config. It goes to the default
    // queue, else the first, rather than fail.
    for (auto& lane : lanes_)
        if (lane.config.is_default)
            return &lane;
    log::warning("sched", "queue '{}' is not configured (queues: {}): job placed in {}", queue, named_.names(),
                 lanes_.front().config.name);
    return &lanes_.front();
}

Result<SchedService::Lane*> SchedService::lane_of(uint64_t id) {
    auto it = lane_index_.find(id);
    if (it == lane_index_.end())
        return make_error(ENOENT, fmt::format("job {} holds no resources", id));
    return &lanes_[it->second];
}

// A change (submit, free, cancel) is worth a pass now, even when the
// 1 s retry timer is armed; several changes in one loop turn share it.
void SchedService::schedule_soon() {
    if (pass_soon_)
        return;
    pass_soon_ = true;
    pass_timer_.start(Duration::zero(), [this] { run_pass(); });
}

void SchedService::run_pass() {
    auto began = Clock::now();
    pass_soon_ = false;
    // Each started queue in turn: a full queue blocks only its own jobs.
    // Every queue's stale plans go first, a stopped queue's too.
    int64_t now = wall_now();
    for (auto& lane : lanes_)
        lane.queue->prepare(now);
    size_t pending = 0;
    // While a job's victims end, queues of lower tiers start nothing: what
    // comes free is for it (sched.md §9).
    int64_t held_for = -1;
    for (const auto& [id, p] : preempting_)
        held_for = std::max(held_for, p.tier);
    for (auto& lane : lanes_) {
        pending += lane.queue->pending_count();
        if (!lane.started)
            continue;
        if (lane.config.priority_tier < held_for) {
            lane.queue->annotate_pending("waiting for a preemption by a higher tier");
            continue;
        }
        for (auto& started : lane.queue->schedule(now)) {
            preempting_.erase(started.id);
            auto it = waiting_.find(started.id);
            if (it == waiting_.end())
                continue;
            broker_.respond(Message::response_to(it->second, {{"id", started.id}, {"R", started.R.to_json()}}));
            waiting_.erase(it);
        }
    }
    preempt(now);
    // Reservations come due and jobs overrun with time alone: look again
    // while anything waits.
    // Unless a change during this pass (an answer above can bring a new
    // request at once) already asked for the next pass: re-arming would
    // drop it.
    if (pending > 0 && !pass_soon_)
        pass_timer_.start(std::chrono::seconds(1), [this] { run_pass(); });
    pass_seconds_.observe(std::chrono::duration<double>(Clock::now() - began).count());
}

void SchedService::preempt(int64_t now) {
    bool dropped = false;
    for (Lane& lane : lanes_) {
        if (!lane.started || lane.config.priority_tier == 0)
            continue;
        const PendingJob* blocked = lane.queue->first_blocked();
        if (!blocked)
            continue;
        auto said = [&](size_t n) { blocked->reason = fmt::format("preempting {} job{}", n, n == 1 ? "" : "s"); };
        if (auto it = preempting_.find(blocked->id); it != preempting_.end()) {
            said(it->second.victims);  // once they are gone, it starts (or preempts again)
            continue;
        }
        // The pass's reservations would stand in the way of a job that
        // starts now: gone until the next pass makes them again.
        if (!std::exchange(dropped, true))
            for (Lane& l : lanes_)
                l.queue->drop_reservations();
        auto victims = choose_victims(lane, *blocked, now);
        if (victims.empty())
            continue;
        for (const auto& [id, at] : victims) {
            const NamedQueue& q = lanes_[at].config;
            preempted_by_[id] = blocked->id;
            nlohmann::json body{{"id", id},
                                {"by", blocked->id},
                                {"mode", preempt_mode_name(q.preempt_mode)},
                                {"signal", q.preempt_signal},
                                {"grace", q.preempt_grace}};
            broker_.rpc(Message::request("job-manager.preempt", body, 0), [id](const Message& resp) {
                if (resp.errnum)
                    log::warning("sched", "job {}: not preempted: {}", id, resp.error_text());
            });
        }
        preempting_[blocked->id] = {victims.size(), lane.config.priority_tier};
        said(victims.size());
        log::info("sched", "job {} (queue {}, tier {}) preempts {} job{}", blocked->id, lane.config.name,
                  lane.config.priority_tier, victims.size(), victims.size() == 1 ? "" : "s");
    }
}

std::vector<std::pair<uint64_t, size_t>> SchedService::choose_victims(const Lane& lane, const PendingJob& job,
                                                                      int64_t now) {
    std::vector<PreemptionCandidate> candidates;
    std::map<uint64_t, size_t> lane_of_candidate;
    for (size_t l = 0; l < lanes_.size(); ++l) {
        const NamedQueue& q = lanes_[l].config;
        if (q.priority_tier >= lane.config.priority_tier || q.preempt_mode == NamedQueue::PreemptMode::off)
            continue;
        for (uint64_t id : lanes_[l].queue->running_ids())
            if (!preempted_by_.count(id)) {
                candidates.push_back({id, q.priority_tier});
                lane_of_candidate[id] = l;
            }
    }
    std::vector<std::pair<uint64_t, size_t>> victims;
    for (uint64_t id : banyan::choose_victims(*matcher_, job.jobspec, std::move(candidates), now))
        victims.emplace_back(id, lane_of_candidate.at(id));
    return victims;
}

void SchedService::victim_gone(uint64_t id) {
    auto it = preempted_by_.find(id);
    if (it == preempted_by_.end())
        return;
    if (auto p = preempting_.find(it->second); p != preempting_.end() && --p->second.victims == 0)
        preempting_.erase(p);
    preempted_by_.erase(it);
}

}  // namespace banyan
