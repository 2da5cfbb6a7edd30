// The job-manager.* requests (doc/spec/jobs.md §7): their table, and the
// one access check most of them share. The handlers, by concern:
//   job_manager_submit.cpp    submit (the checks, then stored)
//   job_manager_queries.cpp   list, info, eventlog, attach, wait, wait-all, stats, queue-list
//   job_manager_control.cpp   cancel, kill, urgency, queue-enable
//   job_manager_running.cpp   output, raise, started, input, proxy, instance
//   job_manager_banks.cpp     banks, priority
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
    method("job-manager.kill-all", true, &JobManager::on_kill_all);
    method("job-manager.urgency", false, &JobManager::on_urgency);
    method("job-manager.update", false, &JobManager::on_update);
    method("job-manager.requeue", false, &JobManager::on_requeue);
    method("job-manager.preempt", true, &JobManager::on_preempt);
    method("job-manager.output", true, &JobManager::on_output);
    method("job-manager.raise", true, &JobManager::on_raise);
    method("job-manager.started", true, &JobManager::on_started);
    method("job-manager.profile", true, &JobManager::on_profile);
    method("job-manager.profile-get", false, &JobManager::on_profile_get);
    method("job-manager.input", false, &JobManager::on_input);
    method("job-manager.queue-list", false, &JobManager::on_queue_list);
    method("job-manager.stats", true, &JobManager::on_stats);
    method("job-manager.banks", true, &JobManager::on_banks);
    method("job-manager.priority", false, &JobManager::on_priority);
    broker_.register_method("job-manager.events", false,
                            broker_.at_rank0([this](const Message& r) { streams_.subscribe(r); }));
    broker_.register_method("job-manager.events-cancel", false,
                            broker_.at_rank0([this](const Message& r) { streams_.cancel(r); }));
    method("job-manager.queue-enable", true, &JobManager::on_queue_enable);
}

Job* JobManager::visible_job(const Message& req, nlohmann::json& body, std::optional<uint32_t>* unmade) {
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
    if (!body.contains("index"))
        return &it->second;
    // ID[INDEX]: an element of the array ID (arrays.md §4).
    auto index = json_field<uint32_t>(body, "index", 0, req.topic);
    if (!index) {
        broker_.respond_error(req, EPROTO, index.error().message);
        return nullptr;
    }
    std::string name = format_element(*id, *index);
    const JobArray* array = it->second.array.get();
    if (!array) {
        broker_.respond_error(req, EINVAL, fmt::format("{}: {} is not a job array", name, format_jobid(*id)));
        return nullptr;
    }
    if (Job* element = element_of(*id, *index))
        return element;
    bool to_make = array->will_make(*index) && it->second.state < JobState::run;
    if (unmade && to_make) {
        *unmade = *index;
        return &it->second;
    }
    broker_.respond_error(req, ENOENT,
                          !array->indexes.contains(*index) ? fmt::format("{}: no such index in that array", name)
                          : to_make ? fmt::format("{}: not made yet (elements are made as they can run)", name)
                              : fmt::format("{}: no such job (ended and purged, or canceled before it ran)", name));
    return nullptr;
}

}  // namespace banyan
