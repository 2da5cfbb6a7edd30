// What users and the owner do to jobs and queues (doc/spec/jobs.md §7):
// job-manager.cancel, kill, urgency (hold and release) and update for
// pending and running jobs, and queue enable/disable/start/stop.
#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <ctime>
#include <utility>

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
    // Acknowledged once on disk: it survives a restart of rank 0.
    queue_states_->store(targets, *enable ? std::nullopt : std::optional(*reason),
                         [this, req, targets, enable = *enable, reason = *reason](const Result<void>& stored) {
                             if (!stored)
                                 return broker_.respond_error(req, stored.error().code, stored.error().message);
                             for (const auto& t : targets) {
                                 if (enable)
                                     disabled_.erase(t);
                                 else
                                     disabled_[t] = reason;
                                 log::info("job-manager", "queue {} {}{}{}", t, enable ? "enabled" : "disabled",
                                           reason.empty() ? "" : ": ", reason);
                             }
                             broker_.respond(Message::response_to(req, nlohmann::json::object()));
                         });
}

void JobManager::on_cancel(const Message& req) {
    nlohmann::json body;
    std::optional<uint32_t> unmade;
    Job* job = visible_job(req, body, &unmade);
    if (!job)
        return;
    auto note = json_field<std::string>(body, "note", "", "cancel");
    if (!note)
        return broker_.respond_error(req, EPROTO, note.error().message);
    if (unmade)
        return cancel_unmade(req, *job, *unmade);
    if (job->state == JobState::inactive)
        return broker_.respond_error(req, EINVAL, fmt::format("{}: job is inactive", format_jobid(job->id)));
    raise(*job, "cancel", note->empty() ? fmt::format("canceled by uid {}", req.userid) : *note, req.userid);
    // An acknowledged cancel survives a crash, as an acknowledged submit does.
    respond_once_stored(Message::response_to(req, nlohmann::json::object()));
}

// job-manager.requeue {id, note?}: a running or inactive job back to
// pending, with its id (jobs.md §7); answered once the event is on disk.
void JobManager::on_requeue(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    auto note = json_field<std::string>(body, "note", "", "requeue");
    if (!note)
        return broker_.respond_error(req, EPROTO, note.error().message);
    // A finished job active again counts as a new one does at submit.
    if (job->state == JobState::inactive) {
        std::string refused = over_user_limits(req);
        if (const NamedQueue* q = queues_.find(job->queue); refused.empty() && q && !is_owner(req))
            refused = over_queue_limits(*q, *job, req.userid);
        if (!refused.empty())
            return broker_.respond_error(req, EUSERS, fmt::format("{}: {}", format_jobid(job->id), refused));
    }
    requeue(*job, note->empty() ? fmt::format("requeued by uid {}", req.userid) : *note, req.userid,
            [this, req](const std::string& why) {
                if (!why.empty())
                    return broker_.respond_error(req, EINVAL, why);
                respond_once_stored(Message::response_to(req, nlohmann::json::object()));
            });
}

// job-manager.preempt {id, by, mode, signal, grace}, from the scheduler
// (sched.md §9): a running job makes way for `by`, canceled or requeued;
// its tasks get `signal`, SIGKILL `grace` seconds later. One that is not
// running any more is left as it is.
void JobManager::on_preempt(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto id = json_field<uint64_t>(*body, "id", 0, req.topic);
    auto by = json_field<uint64_t>(*body, "by", 0, req.topic);
    auto mode = json_field<std::string>(*body, "mode", "cancel", req.topic);
    auto signo = json_field<int64_t>(*body, "signal", SIGTERM, req.topic);
    auto grace = json_field<double>(*body, "grace", 30, req.topic);
    if (auto e = first_error(id, by, mode, signo, grace))
        return broker_.respond_error(req, EPROTO, e->message);
    if ((*mode != "cancel" && *mode != "requeue") || *signo < 1 || *signo >= NSIG || !(*grace >= 0 && *grace <= 86400))
        return broker_.respond_error(req, EINVAL, "job-manager.preempt: expected mode cancel or requeue, a signal, "
                                                  "and a grace of 0 to 86400 s");
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
    Job* job = find(*id);
    if (!job || job->state != JobState::run)
        return;
    const Job* preemptor = find(*by);
    std::string note = fmt::format("preempted by {}{}", format_jobid(*by),
                                   preemptor && !preemptor->queue.empty() ? " (queue " + preemptor->queue + ")" : "");
    job->terminate_signal = static_cast<int>(*signo);
    job->terminate_grace = *grace;
    if (*mode == "requeue")
        return requeue(*job, note, 0, [this, id = *id, note](const std::string& why) {
            if (Job* j = find(id); j && !why.empty())
                raise(*j, "preempt", note, 0);  // not requeued: it ends all the same
        });
    raise(*job, "preempt", note, 0);
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

// job-manager.kill-all {signal}: every running job gets it (a nested rank 0
// passing on a SIGUSR1 its own job was sent, instances.md §4).
void JobManager::on_kill_all(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto signo = json_field<int64_t>(*body, "signal", 0, "kill-all");
    if (!signo || *signo < 1 || *signo >= NSIG)
        return broker_.respond_error(req, EINVAL,
                                     fmt::format("kill-all.signal: expected a signal number 1 to {}", NSIG - 1));
    int count = 0;
    for (auto& [id, job] : jobs_)
        if (job.state == JobState::run) {
            exec_.signal(job, static_cast<int>(*signo));
            count++;
        }
    broker_.respond(Message::response_to(req, {{"count", count}}));
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

// job-manager.update {id, duration?, name?, queue?, urgency?}: a pending
// job's time limit, name, queue or urgency, a running job's time limit or
// name (jobs.md §7), checked as at submit; a user may lower a time limit,
// only the owner raise one (Slurm's rule). A new queue is asked of the
// scheduler first: could the job ever run there?
void JobManager::on_update(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    for (const auto& [key, value] : body.items())
        if (key != "id" && key != "index" && key != "duration" && key != "name" && key != "queue" &&
            key != "urgency" && key != "throttle")
            return broker_.respond_error(
                req, EINVAL,
                fmt::format("{}: cannot be updated (expected duration, name, queue, urgency or throttle)",
                            one_line(key)));
    if (body.size() < (body.contains("index") ? 3u : 2u))
        return broker_.respond_error(req, EINVAL, "nothing to update: give duration, name, queue or urgency");
    bool pending = job->state == JobState::depend || job->state == JobState::priority || job->state == JobState::sched;
    if (!pending && job->state != JobState::run)
        return broker_.respond_error(req, EINVAL,
                                     fmt::format("{}: job is {}; it can be updated only while it is pending or running",
                                                 format_jobid(job->id), state_name(job->state)));
    if (!pending && (body.contains("queue") || body.contains("urgency")))
        return broker_.respond_error(
            req, EINVAL,
            fmt::format("{}: job is run; only its time limit and name can change now", format_jobid(job->id)));
    nlohmann::json update = {{"userid", req.userid}};
    if (body.contains("throttle")) {  // a job array's (arrays.md §4); 0: none
        auto throttle = json_field<uint32_t>(body, "throttle", 0, "update");
        if (!throttle)
            return broker_.respond_error(req, EINVAL, "throttle: expected 0 (none) or more elements at once");
        if (!job->array)
            return broker_.respond_error(req, EINVAL,
                                         fmt::format("{}: throttle: not a job array", format_jobid(job->id)));
        update["throttle"] = *throttle;
    }
    auto name = json_field<std::string>(body, "name", job->name, "update");
    auto duration = json_field<double>(body, "duration", job->duration, "update");
    auto queue_name = json_field<std::string>(body, "queue", job->queue, "update");
    auto urgency = json_field<int64_t>(body, "urgency", job->urgency, "update");
    if (auto e = first_error(name, duration, queue_name, urgency))
        return broker_.respond_error(req, EINVAL, e->message);
    if (body.contains("name")) {
        if (name->empty() || name->size() > 256 ||
            std::any_of(name->begin(), name->end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
            return broker_.respond_error(req, EINVAL, "name: expected 1 to 256 printable characters");
        update["name"] = *name;
    }
    if (body.contains("urgency")) {  // as job-manager.urgency
        if (*urgency < 0 || *urgency > kMaxUrgency)
            return broker_.respond_error(req, EINVAL, fmt::format("urgency: expected 0 to {}", kMaxUrgency));
        if (*urgency > kMaxGuestUrgency && !is_owner(req))
            return broker_.respond_error(
                req, EPERM,
                fmt::format("urgency {}: only the instance owner may go above {}", *urgency, kMaxGuestUrgency));
    }
    if (body.contains("duration")) {
        if (!std::isfinite(*duration) || *duration < 0 || *duration > 1e9)
            return broker_.respond_error(req, EINVAL, "duration: expected seconds, 0 (none) to 1e9");
        update["duration"] = *duration;
    }
    // The queue it goes to (a new one, or its own), and its limits. A job
    // left with no time limit in a queue with a max-duration takes it, as
    // at submit.
    bool new_queue = body.contains("queue") && *queue_name != job->queue;
    auto queue = queues_.resolve(*queue_name);
    if (!queue)
        return broker_.respond_error(req, EINVAL, queue.error().message);
    if (*queue) {
        Job changed = *job;
        changed.duration = *duration;
        if ((new_queue || body.contains("duration")) && changed.duration <= 0 && (*queue)->max_duration > 0)
            update["duration"] = changed.duration = (*queue)->max_duration;
        std::string refused =
            new_queue ? over_queue_limits(**queue, changed, job->userid) : over_max_duration(**queue, changed.duration);
        if (!refused.empty())
            return broker_.respond_error(req, EINVAL, refused);
    }
    // Raised, as it ends up (none in a queue with a max-duration is that max).
    if (update.contains("duration")) {
        double after = update["duration"].get<double>();
        bool raised = after == 0 ? job->duration > 0 : job->duration > 0 && after > job->duration;
        if (raised && !is_owner(req))
            return broker_.respond_error(req, EPERM,
                                         fmt::format("time limit: only the instance owner may raise it (now {})",
                                                     format_duration(job->duration)));
    }
    std::optional<int> new_urgency;
    if (body.contains("urgency"))
        new_urgency = static_cast<int>(*urgency);
    if (!new_queue)
        return commit_update(req, job->id, update, new_urgency);
    update["queue"] = *queue ? (*queue)->name : "";
    Job moved = *job;
    moved.array.reset();  // (shared: the trial must not change the array)
    moved.apply_update(update);
    auto spec = parse_json(moved.sched_jobspec);
    if (!spec)
        return broker_.respond_error(req, EIO, "the job's jobspec: " + spec.error().message);
    broker_.rpc(Message::request("sched.feasibility", {{"jobspec", std::move(*spec)}}, 0),
                [this, req, id = job->id, update, new_urgency](const Message& resp) {
                    // (ENOSYS: no scheduler loaded here; sched.alloc decides.)
                    if (resp.errnum && resp.errnum != ENOSYS)
                        return broker_.respond_error(req, resp.errnum, resp.error_text());
                    answered_barrier(req, [&] { commit_update(req, id, update, new_urgency); });
                });
}

// The update, as events (`update`, then `urgency`). A pending job whose
// time limit or queue changed is asked for again, as it now is (its
// priority again for a new queue, its bank charge made again: a time
// limit counts there); a running one ends at its new limit.
void JobManager::commit_update(const Message& req, JobId id, const nlohmann::json& update, std::optional<int> urgency) {
    Job* job = find(id);
    bool pending =
        job && (job->state == JobState::depend || job->state == JobState::priority || job->state == JobState::sched);
    bool running = job && job->state == JobState::run && !update.contains("queue") && !urgency;
    if (!pending && !running)
        return broker_.respond_error(req, EINVAL, fmt::format("{}: no longer pending", format_jobid(id)));
    bool replan = update.contains("duration") || update.contains("queue");
    if (update.size() > 1)  // more than the userid
        post(*job, "update", update);
    if (running && update.contains("duration")) {
        // Its tasks run on to the new limit; the scheduler plans with it.
        exec_.time_limit_changed(*job);
        nlohmann::json extend = {{"id", id}};
        if (job->duration > 0)
            extend["end"] = static_cast<int64_t>(std::ceil(job->t_run + job->duration));
        broker_.rpc(Message::request("sched.extend", extend, 0), [id](const Message& resp) {
            if (resp.errnum && resp.errnum != ENOSYS)
                log::warning("job-manager", "{}: the scheduler kept its old end: {}", format_jobid(id),
                             resp.error_text());
        });
    } else if (job->state == JobState::sched && replan) {
        // Its urgency first, then its priority once, then asked for once.
        if (urgency) {
            post(*job, "urgency", {{"userid", req.userid}, {"urgency", *urgency}});
            urgency.reset();  // (done: not again below)
        }
        if (update.contains("queue") || job->priority != priority_of(*job))
            post(*job, "priority", {{"priority", priority_of(*job)}});
        sched_.withdraw(job->id);
        left_scheduler(*job);
        to_scheduler(*job);
    }
    if (urgency)
        set_urgency(*job, *urgency, req.userid);
    if (job->array && update.contains("throttle"))
        make_elements(*job);  // (a higher throttle makes room)
    respond_once_stored(Message::response_to(req, nlohmann::json::object()));
}

}  // namespace banyan
