// The job-manager.* requests (doc/spec/jobs.md §7).
#include <algorithm>
#include <array>
#include <csignal>
#include <ctime>

#include <unistd.h>

#include <fmt/format.h>

#include "broker/job_manager/job_manager.hpp"
#include "broker/job_manager/signature_check.hpp"
#include "core/duration.hpp"
#include "core/io_data.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"
#include "core/text.hpp"
#include "sched/jobspec.hpp"
#include "sched/shell_options.hpp"

namespace banyan {
namespace {

// The jobspec's text as submitted (valid JSON: every message is checked
// when read), not written again from the parsed one; unless it spans lines,
// as the shell reads it within one (shell.md §3).
std::string stored_text(std::string_view payload, const nlohmann::json& spec) {
    auto raw = json_raw_at(payload, {"jobspec"});
    if (raw && *raw && (*raw)->find('\n') == std::string_view::npos && (*raw)->find('\r') == std::string_view::npos)
        return std::string(**raw);
    return spec.dump();
}

constexpr size_t kMaxOutputChunk = 1 << 20;

bool is_owner(const Message& req) { return req.rolemask & role::owner; }

// Pending jobs first (highest priority first), then running (newest
// start first), then inactive (most recently ended first).
bool listing_order(const Job* a, const Job* b) {
    auto group = [](const Job* j) {
        return j->state == JobState::inactive ? 2 : j->state == JobState::run || j->state == JobState::cleanup ? 1 : 0;
    };
    if (group(a) != group(b))
        return group(a) < group(b);
    switch (group(a)) {
        case 0:
            return a->priority != b->priority ? a->priority > b->priority : a->id < b->id;
        case 1:
            return a->t_run != b->t_run ? a->t_run > b->t_run : a->id > b->id;
        default:
            return a->t_inactive != b->t_inactive ? a->t_inactive > b->t_inactive : a->id > b->id;
    }
}

}  // namespace

void JobManager::register_methods() {
    auto method = [&](const char* topic, bool owner_only, void (JobManager::*fn)(const Message&)) {
        broker_.register_method(topic, owner_only, broker_.at_rank0([this, fn](const Message& r) { (this->*fn)(r); }));
    };
    method("job-manager.submit", false, &JobManager::on_submit);
    method("job-manager.list", false, &JobManager::on_list);
    method("job-manager.info", false, &JobManager::on_info);
    method("job-manager.instance", false, &JobManager::on_instance);
    method("job-manager.proxy", false, &JobManager::on_proxy);
    method("job-manager.eventlog", false, &JobManager::on_eventlog);
    method("job-manager.attach", false, &JobManager::on_attach);
    method("job-manager.wait", false, &JobManager::on_wait);
    method("job-manager.wait-all", false, &JobManager::on_wait_all);
    method("job-manager.cancel", false, &JobManager::on_cancel);
    method("job-manager.kill", false, &JobManager::on_kill);
    method("job-manager.urgency", false, &JobManager::on_urgency);
    method("job-manager.output", true, &JobManager::on_output);
    method("job-manager.raise", true, &JobManager::on_raise);
    method("job-manager.started", true, &JobManager::on_started);
    method("job-manager.input", false, &JobManager::on_input);
    method("job-manager.queue-list", false, &JobManager::on_queue_list);
    method("job-manager.stats", true, &JobManager::on_stats);
    broker_.register_method("job-manager.events", false,
                            broker_.at_rank0([this](const Message& r) { streams_.subscribe(r); }));
    broker_.register_method("job-manager.events-cancel", false,
                            broker_.at_rank0([this](const Message& r) { streams_.cancel(r); }));
    method("job-manager.queue-enable", true, &JobManager::on_queue_enable);
}

Job* JobManager::visible_job(const Message& req, nlohmann::json& body) {
    auto parsed = req.json();
    if (!parsed) {
        broker_.respond_error(req, EPROTO, parsed.error().message);
        return nullptr;
    }
    body = std::move(*parsed);
    if (!body.contains("id")) {
        broker_.respond_error(req, EPROTO, fmt::format("{}: expected {{\"id\": JOBID}}", req.topic));
        return nullptr;
    }
    auto id = json_field<uint64_t>(body, "id", 0, req.topic);
    if (!id) {
        broker_.respond_error(req, EPROTO, id.error().message);
        return nullptr;
    }
    auto it = jobs_.find(*id);
    if (it == jobs_.end() || unstored_.count(*id)) {  // a job exists once it is on disk
        broker_.respond_error(req, ENOENT, fmt::format("{}: no such job", format_jobid(*id)));
        return nullptr;
    }
    if (!is_owner(req) && it->second.userid != req.userid) {
        broker_.respond_error(req, EPERM, fmt::format("{}: not your job", format_jobid(*id)));
        return nullptr;
    }
    return &it->second;
}

// job-manager.max-active-per-user / max-pending-per-user, for users other
// than the owner and admins: why `req`'s submission is refused, or "".
// Counted only where a limit is set.
std::string JobManager::over_user_limits(const Message& req) const {
    if (is_owner(req) || (limits_.max_active_per_user == 0 && limits_.max_pending_per_user == 0))
        return "";
    size_t active = 0, pending = 0;
    for (const auto& [id, job] : jobs_) {
        if (job.userid != req.userid || job.state == JobState::inactive)
            continue;
        active++;
        if (job.state < JobState::run)
            pending++;
    }
    if (limits_.max_active_per_user > 0 && active >= limits_.max_active_per_user)
        return fmt::format("uid {} has {} active jobs, the most a user may have (job-manager.max-active-per-user)",
                           req.userid, active);
    if (limits_.max_pending_per_user > 0 && pending >= limits_.max_pending_per_user)
        return fmt::format("uid {} has {} pending jobs, the most a user may have (job-manager.max-pending-per-user)",
                           req.userid, pending);
    return "";
}

std::string JobManager::over_queue_limits(const NamedQueue& q, const Job& job, uint32_t userid) const {
    if (auto d = disabled_.find(q.name); d != disabled_.end())
        return fmt::format("queue '{}' is disabled{}{}", q.name, d->second.empty() ? "" : ": ", d->second);
    if (q.max_duration > 0 && job.duration > q.max_duration)
        return fmt::format("queue '{}': a time limit of {} is over its max-duration of {}", q.name,
                           format_duration(job.duration), format_duration(q.max_duration));
    if (q.max_nodes > 0 && job.nnodes > q.max_nodes)
        return fmt::format("queue '{}': {} nodes is over its max-nodes of {}", q.name, job.nnodes, q.max_nodes);
    if (q.max_active_per_user > 0) {
        int64_t active = 0;
        for (const auto& [id, j] : jobs_)
            active += j.userid == userid && j.queue == q.name && j.state != JobState::inactive;
        if (active >= q.max_active_per_user)
            return fmt::format("queue '{}': uid {} has {} active jobs there, its max-active-per-user", q.name, userid,
                               active);
    }
    return "";
}

void JobManager::on_queue_list(const Message& req) {
    // Each queue: its config, whether it takes submissions, and its jobs.
    std::map<std::string, std::pair<int64_t, int64_t>> counts;  // pending, running
    for (const auto& [id, j] : jobs_)
        if (!j.queue.empty() && j.state != JobState::inactive)
            (j.state < JobState::run ? counts[j.queue].first : counts[j.queue].second)++;
    nlohmann::json all = nlohmann::json::array();
    for (const auto& q : queues_.queues) {
        nlohmann::json one = {{"name", q.name},
                              {"default", q.is_default},
                              {"requires", q.requires_text},
                              {"max-duration", q.max_duration},
                              {"max-nodes", q.max_nodes},
                              {"max-active-per-user", q.max_active_per_user},
                              {"enabled", !disabled_.count(q.name)},
                              {"pending", counts[q.name].first},
                              {"running", counts[q.name].second}};
        if (auto d = disabled_.find(q.name); d != disabled_.end())
            one["disabled-reason"] = d->second;
        all.push_back(std::move(one));
    }
    broker_.respond(Message::response_to(req, {{"queues", std::move(all)}}));
}

// job-manager.stats (owner only): the numbers /metrics shows (http.md §5).
void JobManager::on_stats(const Message& req) {
    constexpr size_t kStates = static_cast<size_t>(JobState::inactive) + 1;
    std::array<uint64_t, kStates> by_state{};                     // counted by index: a scrape walks every job
    std::map<std::string, std::pair<uint64_t, uint64_t>> queues;  // pending, running
    for (const auto& q : queues_.queues)
        queues[q.name];
    uint64_t demand_nodes = 0, demand_cores = 0, demand_gpus = 0;
    for (const auto& [id, j] : jobs_) {
        by_state[static_cast<size_t>(j.state)]++;
        if (j.state == JobState::inactive)
            continue;
        bool pending = j.state < JobState::run;
        if (!j.queue.empty())
            (pending ? queues[j.queue].first : queues[j.queue].second)++;
        if (pending && !unstored_.count(id)) {
            demand_nodes += j.nnodes;
            demand_cores += j.ncores;
            demand_gpus += j.ngpus;
        }
    }
    nlohmann::json states = nlohmann::json::object();
    for (size_t i = 0; i < kStates; i++)
        states[std::string(state_name(static_cast<JobState>(i)))] = by_state[i];
    nlohmann::json by_queue = nlohmann::json::object();
    for (const auto& [name, c] : queues)
        by_queue[name] = {{"pending", c.first}, {"running", c.second}};
    broker_.respond(Message::response_to(
        req, {{"states", states},
              {"queues", std::move(by_queue)},
              {"submitted", counters_.submitted},
              {"started", counters_.started},
              {"completed", counters_.completed},
              {"results", counters_.by_result},
              {"demand", {{"nodes", demand_nodes}, {"cores", demand_cores}, {"gpus", demand_gpus}}},
              {"commit", db_->commit_latency().to_json()}}));
}

void JobManager::on_queue_enable(const Message& req) {
    auto body = req.json();
    auto name = body ? json_field<std::string>(*body, "queue", "", "job-manager.queue-enable")
                     : Result<std::string>(body.error());
    auto enable = body ? json_field(*body, "enable", true, "job-manager.queue-enable") : Result<bool>(body.error());
    auto reason = body ? json_field<std::string>(*body, "reason", "", "job-manager.queue-enable")
                       : Result<std::string>(body.error());
    if (auto e = first_error(name, enable, reason))
        return broker_.respond_error(req, EPROTO, e->message);
    // "" or "all": every queue.
    std::vector<std::string> targets;
    if (name->empty() || *name == "all") {
        for (const auto& q : queues_.queues)
            targets.push_back(q.name);
    } else if (queues_.find(*name)) {
        targets.push_back(*name);
    } else {
        return broker_.respond_error(req, ENOENT,
                                     queues_.empty()
                                         ? "this instance has no queues"
                                         : fmt::format("unknown queue '{}' (queues: {})", *name, queues_.names()));
    }
    for (const auto& t : targets) {
        if (*enable)
            disabled_.erase(t);
        else
            disabled_[t] = *reason;
        log::info("job-manager", "queue {} {}{}{}", t, *enable ? "enabled" : "disabled", reason->empty() ? "" : ": ",
                  *reason);
    }
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
}

// A continuation of a request outside its handler (after a signature
// check, or the scheduler's answer) is its own exception barrier: what it
// throws answers the request (EPROTO), as the broker does for a handler.
void JobManager::answered_barrier(const Message& req, const std::function<void()>& fn) {
    try {
        fn();
    } catch (const std::exception& e) {
        log::error("job-manager", "{}: {}", req.topic, e.what());
        broker_.respond_error(req, EPROTO, fmt::format("{}: {}", req.topic, e.what()));
    }
}

// A job of another user than the broker's runs as that user: the job
// manager checks, before it stores anything, that the user signed this
// jobspec (doc/spec/jobs.md §2.1); banyan-imp checks again on each node.
void JobManager::on_submit(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    if (!body->contains("jobspec") || !(*body)["jobspec"].is_object())
        return broker_.respond_error(req, EPROTO, "job-manager.submit: expected {\"jobspec\": {...}}");
    auto signature = json_field<std::string>(*body, "J", "", "submit");
    if (!signature)
        return broker_.respond_error(req, EPROTO, signature.error().message);
    if (!limits_.signed_jobs || req.userid == getuid() || !signature->starts_with("MUNGE:"))
        return submit(req, std::move(*body));
    if (!signature_check_)
        signature_check_ = std::make_unique<SignatureCheck>(broker_.reactor());
    signature_check_->decode(
        *signature, [this, req, body = std::move(*body)](Result<SignedPayload> decoded) mutable {
            if (!decoded)
                return broker_.respond_error(req, EPERM, decoded.error().message);
            if (decoded->uid != req.userid)
                return broker_.respond_error(
                    req, EPERM,
                    fmt::format("J: signed by uid {}, not by the submitting user (uid {})", decoded->uid, req.userid));
            if (decoded->jobspec != body["jobspec"])
                return broker_.respond_error(req, EPERM, "J: the signed jobspec is not the one submitted");
            answered_barrier(req, [&] { submit(req, std::move(body)); });
        });
}

void JobManager::submit(const Message& req, nlohmann::json body_json) {
    auto* body = &body_json;
    if (const auto& failing = db_->failing())  // refused at once, not kept waiting for the disk
        return broker_.respond_error(req, EIO,
                                     "the job database cannot be written, nothing was submitted: " + failing->message);
    const nlohmann::json& spec = (*body)["jobspec"];
    auto urgency = json_field<int64_t>(*body, "urgency", kDefaultUrgency, "submit");
    if (!urgency)
        return broker_.respond_error(req, EPROTO, urgency.error().message);
    if (*urgency < 0 || *urgency > kMaxUrgency)
        return broker_.respond_error(req, EINVAL, fmt::format("urgency {}: expected 0 to {}", *urgency, kMaxUrgency));
    if (*urgency > kMaxGuestUrgency && !is_owner(req))
        return broker_.respond_error(req, EPERM,
                                     fmt::format("urgency {}: only the instance owner may go above {}", *urgency,
                                                 kMaxGuestUrgency));
    // Jobs are version 1 jobspecs, held to RFC 25 as Flux holds them (the
    // canonical RFC 14 form is for banyan-sched-query).
    auto parsed = Jobspec::from_json(spec, JobspecRules::v1);
    if (!parsed)
        return broker_.respond_error(req, EINVAL, "jobspec: " + parsed.error().message);
    if (parsed->tasks.empty() || parsed->tasks[0].command.empty())
        return broker_.respond_error(req, EINVAL, "jobspec: tasks[0].command: a job needs a command");
    // Refused now, not after the job waited for its resources.
    if (auto options = read_shell_options(json_object_at(spec, {"attributes", "system"})); !options)
        return broker_.respond_error(req, EINVAL, options.error().message);
    auto signature = json_field<std::string>(*body, "J", "", "submit");
    if (!signature)
        return broker_.respond_error(req, EPROTO, signature.error().message);
    if (limits_.signed_jobs && req.userid != getuid() && !signature->starts_with("MUNGE:"))
        return broker_.respond_error(req, EPERM,
                                     "this instance runs jobs as their users and needs the jobspec signed with MUNGE "
                                     "(banyan submit signs it when munged runs)");
    if (auto refused = over_user_limits(req); !refused.empty())
        return broker_.respond_error(req, EDQUOT, refused);
    // The queue: named plainly when unknown, disabled or over a limit.
    auto asked = json_field<std::string>(json_object_at(spec, {"attributes", "system"}), "queue", "",
                                         "jobspec: attributes.system");
    if (!asked)
        return broker_.respond_error(req, EINVAL, asked.error().message);
    auto queue = queues_.resolve(*asked);
    if (!queue)
        return broker_.respond_error(req, EINVAL, queue.error().message);
    Job job;
    if (auto r = job.read_jobspec(spec, queues_); !r)
        return broker_.respond_error(req, EINVAL, "jobspec: " + r.error().message);
    if (*queue)
        if (auto refused = over_queue_limits(**queue, job, req.userid); !refused.empty())
            return broker_.respond_error(req, EINVAL, refused);
    for (const auto& d : job.dependencies) {
        auto t = jobs_.find(d.target);
        if (t == jobs_.end())
            return broker_.respond_error(req, ENOENT, fmt::format("dependency {}:{}: no such job", d.scheme, d.given));
        if (!is_owner(req) && t->second.userid != req.userid)
            return broker_.respond_error(req, EPERM, fmt::format("dependency {}:{}: not your job", d.scheme, d.given));
    }
    job.urgency = static_cast<int>(*urgency);
    // A job that can never run here is refused now, in one line, rather
    // than acknowledged and failed after (sched.md §7, sched.feasibility:
    // a local handler, answered before rpc returns; it never waits for
    // the graph). Only what the scheduler reads goes.
    const auto& system = json_object_at(spec, {"attributes", "system"});
    nlohmann::json feasible_spec = {{"version", spec.contains("version") ? spec["version"] : nlohmann::json(1)},
                                    {"resources", spec["resources"]},
                                    {"tasks", spec.contains("tasks") ? spec["tasks"] : nlohmann::json::array()},
                                    {"attributes", {{"system", nlohmann::json::object()}}}};
    for (const char* key : {"queue", "constraints", "duration"})
        if (system.contains(key))
            feasible_spec["attributes"]["system"][key] = system[key];
    broker_.rpc(Message::request("sched.feasibility", {{"jobspec", std::move(feasible_spec)}}, 0),
                [this, req, body = std::move(body_json), job = std::move(job), signature = *signature](
                    const Message& resp) mutable {
                    // (ENOSYS: no scheduler loaded here; sched.alloc decides.)
                    if (resp.errnum && resp.errnum != ENOSYS)
                        return broker_.respond_error(req, resp.errnum, resp.error_text());
                    answered_barrier(req, [&] { accept(req, body["jobspec"], std::move(job), signature); });
                });
}

// The submission, every check passed: stored, then acknowledged.
void JobManager::accept(const Message& req, const nlohmann::json& spec, Job job, const std::string& signature) {
    job.id = ids_.next();
    job.userid = req.userid;
    job.t_submit = wall_now();
    db_->add_job(job.id, job.userid, job.t_submit, stored_text(*req.payload, spec), signature);
    auto [it, inserted] = jobs_.emplace(job.id, std::move(job));
    Job& j = it->second;
    for (const auto& d : j.dependencies)
        dependents_.emplace(d.target, j.id);
    post(j, "submit", {{"userid", j.userid}, {"urgency", j.urgency}});
    // The answer and the first step wait until the job is on disk (or the
    // commit fails and drop_unstored() answers).
    Message submit_req = req;
    submit_req.payload.reset();  // only answered: the jobspec is in jobs_ and the database
    unstored_.emplace(j.id, std::move(submit_req));
    db_->after_commit([this, id = j.id, resp = Message::response_to(req, {{"id", j.id}})]() mutable {
        if (!unstored_.erase(id))
            return;  // dropped: answered with the error
        broker_.respond(std::move(resp));
        if (auto found = jobs_.find(id); found != jobs_.end())
            advance(found->second);
    });
}

// Submissions whose commit failed (a full disk): refused, and forgotten.
void JobManager::drop_unstored(const std::vector<JobId>& ids, const Error& error) {
    for (JobId id : ids) {
        auto submit = unstored_.find(id);
        if (submit == unstored_.end())
            continue;
        broker_.respond_error(submit->second, EIO,
                              "the job database cannot be written, nothing was submitted: " + error.message);
        unstored_.erase(submit);
        if (auto it = jobs_.find(id); it != jobs_.end())
            for (const auto& d : it->second.dependencies) {
                auto [first, last] = dependents_.equal_range(d.target);
                for (auto e = first; e != last;)
                    e = e->second == id ? dependents_.erase(e) : std::next(e);
            }
        // Never advanced (dependencies_changed waits for the disk), so
        // nothing else holds it; withdrawn all the same, should it be asked.
        sched_.withdraw(id);
        begin_timers_.erase(id);
        exec_.forget(id);
        jobs_.erase(id);
    }
}

void JobManager::on_list(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto all_users = json_field<bool>(*body, "all_users", false, "list");
    auto max = json_field<uint64_t>(*body, "max", 0, "list");
    auto states_json = json_field<nlohmann::json>(*body, "states", nlohmann::json::array(), "list");
    if (auto e = first_error(all_users, max, states_json))
        return broker_.respond_error(req, EPROTO, e->message);
    if (*all_users && !is_owner(req))
        return broker_.respond_error(req, EPERM, "only the instance owner may list other users' jobs");
    std::array<bool, 6> wanted{true, true, true, true, true, false};
    if (!states_json->empty()) {
        wanted.fill(false);
        for (const auto& s : *states_json) {
            auto state = s.is_string() ? state_from_name(s.get<std::string>())
                                       : Result<JobState>(make_error(EPROTO, "list.states: expected names"));
            if (!state)
                return broker_.respond_error(req, EINVAL, state.error().message);
            wanted[static_cast<size_t>(*state)] = true;
        }
    }
    std::vector<const Job*> selected;
    for (const auto& [id, job] : jobs_)
        if (wanted[static_cast<size_t>(job.state)] && (*all_users || job.userid == req.userid) &&
            !unstored_.count(id))  // listed once on disk
            selected.push_back(&job);
    std::sort(selected.begin(), selected.end(), listing_order);
    if (*max > 0 && selected.size() > *max)
        selected.resize(*max);
    // Written as text: most summaries are cached, and 10,000 of them must
    // list in well under 100 ms.
    static const std::string columns = nlohmann::json(Job::summary_columns()).dump();
    std::string text = "{\"columns\":" + columns + ",\"jobs\":[";
    size_t size = text.size() + 2;
    for (const Job* j : selected)
        size += j->summary_row().size() + 1;
    text.reserve(size);
    for (const Job* j : selected) {
        text += j->summary_row();
        text += ',';
    }
    if (!selected.empty())
        text.pop_back();
    text += "]}";
    Message resp = Message::response_to(req, nlohmann::json::object());
    resp.payload = std::move(text);
    broker_.respond(std::move(resp));
}

void JobManager::on_info(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    using Stored = std::pair<std::string, std::vector<JobEvent>>;
    db_->read(
        [id = job->id](JobDbReader& reader) -> Result<Stored> {
            auto spec = reader.jobspec(id);
            if (!spec)
                return spec.error();
            auto events = reader.events(id, 0);
            if (!events)
                return events.error();
            return Stored{std::move(*spec), std::move(*events)};
        },
        [this, req, id = job->id](const Result<Stored>& stored) {
            auto it = jobs_.find(id);
            if (!stored || it == jobs_.end())
                return broker_.respond_error(
                    req, stored ? ENOENT : EIO,
                    stored ? fmt::format("{}: no such job (purged)", format_jobid(id)) : stored.error().message);
            auto jobspec = parse_json(stored->first);
            if (!jobspec)
                return broker_.respond_error(req, EIO, "stored jobspec: " + jobspec.error().message);
            nlohmann::json out{{"job", it->second.summary()}, {"jobspec", std::move(*jobspec)}};
            for (const auto& ev : stored->second)
                if (ev.name == "alloc" && ev.context.contains("R"))
                    out["R"] = ev.context["R"];
            broker_.respond(Message::response_to(req, out));
        });
}

// A running job's rank 0 is a nested instance's (doc/spec/instances.md
// §4): recorded as an event, so it outlives a restart of this rank 0.
void JobManager::on_instance(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto uri = json_field<std::string>(body, "uri", "", "instance");
    if (!uri)
        return broker_.respond_error(req, EPROTO, uri.error().message);
    if (!uri->starts_with("local:///") || uri->size() > 4096)
        return broker_.respond_error(req, EINVAL, "instance.uri: expected local:///PATH");
    if (job->state != JobState::run)
        return broker_.respond_error(req, EINVAL,
                                     fmt::format("{}: job is {}; only a running job is an instance",
                                                 format_jobid(job->id), state_name(job->state)));
    post(*job, "instance", {{"uri", *uri}});
    respond_once_stored(Message::response_to(req, nlohmann::json::object()));
}

// A request for the nested instance job `id` runs (instances.md §5), from
// its user or the owner: to the exec service of the job's first rank,
// whose shell passes it on as the job's user; its answer comes back as
// this request's.
void JobManager::on_proxy(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    if (job->instance_uri.empty())
        return broker_.respond_error(
            req, EINVAL,
            fmt::format("{} is not an instance (run by banyan batch or banyan alloc)", format_jobid(job->id)));
    if (job->state != JobState::run || job->ranks.empty())
        return broker_.respond_error(
            req, EINVAL,
            fmt::format("{} is {}: its instance has ended", format_jobid(job->id), state_name(job->state)));
    const auto& request = json_object_at(body, {"request"});
    if (request.empty())
        return broker_.respond_error(req, EPROTO,
                                     "job-manager.proxy: expected {\"id\", \"request\": {topic, payload}}");
    nlohmann::json forward{{"id", job->id}, {"uri", job->instance_uri}, {"request", request}};
    broker_.rpc(Message::request("exec.proxy", forward, job->ranks.front()), [this, req](const Message& resp) {
        if (resp.errnum != 0)
            return broker_.respond_error(req, static_cast<int>(resp.errnum), resp.error_text());
        auto payload = resp.json();
        if (!payload)
            return broker_.respond_error(req, EPROTO, payload.error().message);
        broker_.respond(Message::response_to(req, *payload));
    });
}

void JobManager::on_eventlog(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    db_->read([id = job->id](JobDbReader& reader) { return reader.events(id, 0); },
              [this, req](const Result<std::vector<JobEvent>>& events) {
                  if (!events)
                      return broker_.respond_error(req, EIO, events.error().message);
                  nlohmann::json list = nlohmann::json::array();
                  for (const auto& ev : *events)
                      list.push_back(ev.to_json());
                  broker_.respond(Message::response_to(req, {{"events", std::move(list)}}));
              });
}

void JobManager::on_attach(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto events_from = json_field<uint32_t>(body, "events_from", 0, "attach");
    auto output_from = json_field<uint32_t>(body, "output_from", 0, "attach");
    if (auto e = first_error(events_from, output_from))
        return broker_.respond_error(req, EPROTO, e->message);
    watchers_.attach(req, job->id, *events_from, *output_from);
}

void JobManager::on_wait(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    watchers_.wait(req, *job);
}

void JobManager::on_wait_all(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    if (!body->is_object())
        return broker_.respond_error(req, EPROTO, "job-manager.wait-all: expected {}");
    if (!req.has_flag(msgflag::streaming))
        return broker_.respond_error(req, EPROTO, "job-manager.wait-all: a streaming request is expected");
    std::vector<JobId> ids;  // ascending, as jobs_ is
    for (const auto& [id, job] : jobs_)
        if (job.userid == req.userid && job.state != JobState::inactive && !unstored_.count(id))
            ids.push_back(id);
    watchers_.wait_all(req, std::move(ids));
}

void JobManager::on_cancel(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto note = json_field<std::string>(body, "note", "", "cancel");
    if (!note)
        return broker_.respond_error(req, EPROTO, note.error().message);
    if (job->state == JobState::inactive)
        return broker_.respond_error(req, EINVAL, fmt::format("{}: job is inactive", format_jobid(job->id)));
    raise(*job, "cancel", note->empty() ? fmt::format("canceled by uid {}", req.userid) : *note, req.userid);
    // An acknowledged cancel survives a crash, as an acknowledged submit does.
    respond_once_stored(Message::response_to(req, nlohmann::json::object()));
}

void JobManager::on_kill(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto signo = json_field<int64_t>(body, "signal", SIGTERM, "kill");
    if (!signo || *signo < 1 || *signo >= NSIG)
        return broker_.respond_error(req, EINVAL, fmt::format("kill.signal: expected a signal number 1 to {}", NSIG - 1));
    if (job->state != JobState::run)
        return broker_.respond_error(req, EINVAL, fmt::format("{}: job is not running", format_jobid(job->id)));
    exec_.signal(*job, static_cast<int>(*signo));
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
}

void JobManager::on_urgency(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto urgency = json_field<int64_t>(body, "urgency", -1, "urgency");
    if (!urgency || *urgency < 0 || *urgency > kMaxUrgency)
        return broker_.respond_error(req, EINVAL, fmt::format("urgency: expected 0 to {}", kMaxUrgency));
    if (*urgency > kMaxGuestUrgency && !is_owner(req))
        return broker_.respond_error(req, EPERM,
                                     fmt::format("urgency {}: only the instance owner may go above {}", *urgency,
                                                 kMaxGuestUrgency));
    if (job->state != JobState::depend && job->state != JobState::priority && job->state != JobState::sched)
        return broker_.respond_error(req, EINVAL,
                                     fmt::format("{}: job is {}; urgency can change only while it is pending",
                                                 format_jobid(job->id), state_name(job->state)));
    int old = job->urgency;
    set_urgency(*job, static_cast<int>(*urgency), req.userid);
    respond_once_stored(Message::response_to(req, {{"old", old}}));  // a hold is never lost to a crash
}

void JobManager::on_output(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto task = json_field<uint32_t>(body, "task", 0, "output");
    auto stream = json_field<std::string>(body, "stream", "stdout", "output");
    auto data = io_data(body, "output");
    if (auto e = first_error(task, stream, data))
        return broker_.respond_error(req, EPROTO, e->message);
    if (*stream != "stdout" && *stream != "stderr")
        return broker_.respond_error(req, EINVAL, "output.stream: expected stdout or stderr");
    if (data->size() > kMaxOutputChunk)
        return broker_.respond_error(req, EINVAL, "output.data: more than 1 MiB in one chunk");
    // Answered once stored: an exec service keeps what is not answered and
    // sends it again to a rank 0 that restarted (doc/spec/shell.md §8).
    if (!job->output_truncated && job->output_bytes + data->size() > limits_.output_limit) {
        // What fits is kept (cut at a character boundary), then one notice
        // where the output stops, so a reader knows it is cut.
        size_t keep = utf8_complete_length(std::string_view(*data).substr(0, limits_.output_limit - job->output_bytes));
        if (keep > 0)
            db_->add_output(job->id, {job->next_output_seq++, *task, *stream, data->substr(0, keep)});
        job->output_truncated = true;
        std::string notice = fmt::format(
            "banyan: output truncated: the job wrote more than {} bytes "
            "(job-manager.output-limit); use --output to keep it all\n",
            limits_.output_limit);
        db_->add_output(job->id, {job->next_output_seq++, *task, "stderr", notice});
    } else if (!job->output_truncated) {
        job->output_bytes += data->size();
        db_->add_output(job->id, {job->next_output_seq++, *task, *stream, *data});
    }
    respond_once_stored(Message::response_to(req, nlohmann::json::object()));
}

// An exception the job's shells raise (exec service, owner only).
void JobManager::on_raise(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto type = json_field<std::string>(body, "type", "exec", "raise");
    auto note = json_field<std::string>(body, "note", "", "raise");
    auto severity = json_field<int64_t>(body, "severity", 0, "raise");
    if (!type || !note || !severity || *severity < 0 || *severity > 7)
        return broker_.respond_error(req, EPROTO, "raise: expected {id, type, note, severity 0-7}");
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    if (job->state != JobState::run)
        return;  // ended already: the first reason stands
    if (*severity == 0)
        return raise(*job, *type, *note, req.userid);
    post(*job, "exception", {{"type", *type}, {"severity", *severity}, {"note", *note}, {"userid", req.userid}});
}

// An exec service's report that its rank's tasks all run: `start` once
// every rank of R has said so.
void JobManager::on_started(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto rank = json_field<uint32_t>(body, "rank", 0, "started");
    if (!rank)
        return broker_.respond_error(req, EPROTO, rank.error().message);
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    exec_.started(*job, *rank);
}

// Input for task 0 (banyan run's stdin), passed to the exec service of the
// first rank of R, where task 0 runs (doc/spec/shell.md section 2).
void JobManager::on_input(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto data = io_data(body, "input");
    auto eof = json_field<bool>(body, "eof", false, "input");
    // --pty: the size of the CLI's terminal, with or without data.
    auto winsize = json_field<nlohmann::json>(body, "winsize", nlohmann::json::object(), "input");
    auto rows = json_field<uint16_t>(json_object_at(body, {"winsize"}), "rows", 0, "input.winsize");
    auto cols = json_field<uint16_t>(json_object_at(body, {"winsize"}), "cols", 0, "input.winsize");
    if (auto e = first_error(data, eof, winsize, rows, cols))
        return broker_.respond_error(req, EPROTO, e->message);
    if (job->state != JobState::run || job->ranks.empty())
        return broker_.respond_error(req, EINVAL, fmt::format("{}: job is not running", format_jobid(job->id)));
    // Checked above; passed on as it came (data and encoding).
    nlohmann::json forward_body{{"id", job->id}, {"eof", *eof}, {"data", std::move(body["data"])}};
    if (body.contains("encoding"))
        forward_body["encoding"] = std::move(body["encoding"]);
    if (*rows > 0 && *cols > 0)
        forward_body["winsize"] = {{"rows", *rows}, {"cols", *cols}};
    Message forward =
        Message::request("exec.stdin", forward_body, *std::min_element(job->ranks.begin(), job->ranks.end()));
    broker_.rpc(std::move(forward), [this, req](const Message& resp) {
        if (resp.errnum)
            return broker_.respond_error(req, static_cast<int>(resp.errnum), resp.error_text());
        broker_.respond(Message::response_to(req, nlohmann::json::object()));
    });
}

}  // namespace banyan
