// job-manager.submit (doc/spec/jobs.md §2, §7): the signature check, the
// limits, the scheduler's feasibility check, then stored and answered.
// Jobs it makes start in DEPEND.
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

}  // namespace

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

std::string JobManager::over_max_duration(const NamedQueue& q, double duration) {
    if (q.max_duration > 0 && duration > q.max_duration)
        return fmt::format("queue '{}': a time limit of {} is over its max-duration of {}", q.name,
                           format_duration(duration), format_duration(q.max_duration));
    return "";
}

std::string JobManager::over_queue_limits(const NamedQueue& q, const Job& job, uint32_t userid) const {
    if (auto d = disabled_.find(q.name); d != disabled_.end())
        return fmt::format("queue '{}' is disabled{}{}", q.name, d->second.empty() ? "" : ": ", d->second);
    if (auto over = over_max_duration(q, job.duration); !over.empty())
        return over;
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
    // The text stored once every check passes, made here once. Its depth
    // is counted in it: a key given twice (the parse keeps the last) may
    // hide a deeper first.
    std::string stored = stored_text(*req.payload, spec);
    if (json_depth(stored, kMaxJobspecDepth) > kMaxJobspecDepth)
        return broker_.respond_error(req, EINVAL,
                                     fmt::format("jobspec: nested deeper than {} levels", kMaxJobspecDepth));
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
    const auto& system = json_object_at(spec, {"attributes", "system"});
    auto asked = json_field<std::string>(system, "queue", "", "jobspec: attributes.system");
    if (!asked)
        return broker_.respond_error(req, EINVAL, asked.error().message);
    auto queue = queues_.resolve(*asked);
    if (!queue)
        return broker_.respond_error(req, EINVAL, queue.error().message);
    // An array within the configured limits, checked before it is read:
    // read, its indexes are made into ranges.
    if (system.contains("array")) {
        auto text = json_field<std::string>(system, "array", "", "jobspec: attributes.system");
        auto within = text ? ArraySpec::parse(*text, limits_.arrays) : Result<ArraySpec>(text.error());
        if (!within)
            return broker_.respond_error(req, EINVAL, "--array " + within.error().message);
    }
    if (auto mail = read_mail_request(system); !mail)
        return broker_.respond_error(req, EINVAL, "jobspec: " + mail.error().message);
    if (auto wait = read_reattach_timeout(system); !wait)
        return broker_.respond_error(req, EINVAL, "jobspec: " + wait.error().message);
    Job job;
    if (auto r = job.read_jobspec(spec, queues_); !r)
        return broker_.respond_error(req, EINVAL, "jobspec: " + r.error().message);
    if (*queue)
        if (auto refused = over_queue_limits(**queue, job, req.userid); !refused.empty())
            return broker_.respond_error(req, EINVAL, refused);
    if (job.ebpf)
        if (auto refused = profiling_.refused(*job.ebpf, req.userid, job.queue); !refused.empty())
            return broker_.respond_error(req, EPERM, refused);
    // The bank it is charged to, and its submit limits (accounting.md §5, §8).
    auto asked_bank = json_field<std::string>(system, "bank", "", "jobspec: attributes.system");
    if (!asked_bank)
        return broker_.respond_error(req, EINVAL, asked_bank.error().message);
    auto bank = banks_.resolve(req.userid, *asked_bank, is_owner(req));
    if (!bank)
        return broker_.respond_error(req, bank.error().code, bank.error().message);
    job.bank = std::move(*bank);
    job.userid = req.userid;
    if (auto refused = banks_.refused(job); !refused.empty())
        return broker_.respond_error(req, EDQUOT, refused);
    for (const auto& d : job.dependencies) {
        auto t = jobs_.find(d.target);
        if (t == jobs_.end())
            return broker_.respond_error(req, ENOENT, fmt::format("dependency {}:{}: no such job", d.scheme, d.given));
        if (!is_owner(req) && t->second.userid != req.userid)
            return broker_.respond_error(req, EPERM, fmt::format("dependency {}:{}: not your job", d.scheme, d.given));
        if (d.index && !(t->second.array && t->second.array->indexes.contains(*d.index)))
            return broker_.respond_error(req, ENOENT,
                                         fmt::format("dependency {}:{}: {}", d.scheme, d.given,
                                                     t->second.array ? "no such index in that array"
                                                                     : "that job is not an array"));
    }
    job.urgency = static_cast<int>(*urgency);
    if (job.reservation.empty())
        return check_feasibility(req, std::move(body_json), std::move(stored), std::move(job), *signature);
    // A job in an advance reservation: may this user's job run in it?
    nlohmann::json ask = {{"name", job.reservation}, {"userid", req.userid}, {"bank", job.bank},
                          {"owner", is_owner(req)}};
    broker_.rpc(Message::request("reservation.check", std::move(ask), 0),
                [this, req, body = std::move(body_json), stored = std::move(stored), job = std::move(job),
                 signature = *signature](const Message& resp) mutable {
                    if (resp.errnum)
                        return broker_.respond_error(req, resp.errnum, resp.error_text());
                    answered_barrier(req, [&] {
                        check_feasibility(req, std::move(body), std::move(stored), std::move(job), signature);
                    });
                });
}

void JobManager::check_feasibility(const Message& req, nlohmann::json body_json, std::string text, Job job,
                                   const std::string& signature) {
    const nlohmann::json& spec = body_json["jobspec"];
    const auto& system = json_object_at(spec, {"attributes", "system"});
    // A job that can never run here is refused now, in one line, rather
    // than acknowledged and failed after (sched.md §7, sched.feasibility:
    // a local handler, answered before rpc returns; it never waits for
    // the graph). Only what the scheduler reads goes.
    nlohmann::json feasible_spec = {{"version", spec.contains("version") ? spec["version"] : nlohmann::json(1)},
                                    {"resources", spec["resources"]},
                                    {"tasks", spec.contains("tasks") ? spec["tasks"] : nlohmann::json::array()},
                                    {"attributes", {{"system", nlohmann::json::object()}}}};
    for (const char* key : {"queue", "constraints", "duration", "reservation"})
        if (system.contains(key))
            feasible_spec["attributes"]["system"][key] = system[key];
    broker_.rpc(Message::request("sched.feasibility", {{"jobspec", std::move(feasible_spec)}}, 0),
                [this, req, text = std::move(text), job = std::move(job), signature](const Message& resp) mutable {
                    // (ENOSYS: no scheduler loaded here; sched.alloc decides.)
                    if (resp.errnum && resp.errnum != ENOSYS)
                        return broker_.respond_error(req, resp.errnum, resp.error_text());
                    answered_barrier(req, [&] { store_submission(req, std::move(text), std::move(job), signature); });
                });
}

// The submission, every check passed: stored, then acknowledged.
void JobManager::store_submission(const Message& req, std::string text, Job job, const std::string& signature) {
    job.id = ids_.next();
    job.userid = req.userid;
    job.t_submit = wall_now();
    db_->add_job(job.id, job.userid, job.t_submit, text, signature);
    if (job.array) {  // its elements are made from these
        job.array->jobspec = std::move(text);
        job.array->signature = signature;
    }
    auto [it, inserted] = jobs_.emplace(job.id, std::move(job));
    Job& j = it->second;
    for (const auto& d : j.dependencies)
        dependents_.emplace(d.target, j.id);
    if (j.singleton)
        singletons_.insert(j.id);
    nlohmann::json submitted = {{"userid", j.userid}, {"urgency", j.urgency}};
    if (!j.bank.empty())
        submitted["bank"] = j.bank;
    post(j, "submit", std::move(submitted));
    banks_.submitted(j);
    // The answer and the first step wait until the job is on disk (or the
    // commit fails and drop_unstored() answers).
    Message submit_req = req;
    submit_req.payload.reset();  // only answered: the jobspec is in jobs_ and the database
    unstored_.emplace(j.id, std::move(submit_req));
    nlohmann::json answer{{"id", j.id}};
    if (j.mail && !mailer_->off_reason().empty())
        answer["warning"] = mailer_->off_reason();
    db_->after_commit([this, id = j.id, resp = Message::response_to(req, answer)]() mutable {
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
        singletons_.erase(id);
        if (auto it = jobs_.find(id); it != jobs_.end())
            for (const auto& d : it->second.dependencies) {
                auto [first, last] = dependents_.equal_range(d.target);
                for (auto e = first; e != last;)
                    e = e->second == id ? dependents_.erase(e) : std::next(e);
            }
        // Never advanced (dependencies_changed waits for the disk), so
        // nothing else holds it; withdrawn all the same, should it be asked.
        sched_.withdraw(id);
        if (auto it = jobs_.find(id); it != jobs_.end()) {
            banks_.ended(it->second);
            left_scheduler(it->second);
        }
        begin_timers_.erase(id);
        exec_.forget(id);
        jobs_.erase(id);
    }
}

}  // namespace banyan
