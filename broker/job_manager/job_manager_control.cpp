// What users and the owner do to jobs and queues (doc/spec/jobs.md §7):
// job-manager.cancel, kill, urgency (hold and release) for pending and
// running jobs, and queue enable/disable/start/stop.
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

}  // namespace banyan
