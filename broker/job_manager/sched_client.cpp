#include "broker/job_manager/sched_client.hpp"

#include <fmt/format.h>

#include "broker/job_manager/job_manager.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"

namespace banyan {

SchedClient::Key SchedClient::key_of(const Job& job) {
    return {-job.priority, job.t_submit, job.id};
}

void SchedClient::request(const Job& job) {
    // Not before the instance runs: after a restart, the scheduler hears of
    // the resources running jobs hold first (Recovery::resume).
    if (job.priority == 0 || keys_.count(job.id) || !table_.instance_running())
        return;  // held, or waiting or asked already
    keys_[job.id] = key_of(job);
    to_ask_.insert(key_of(job));
    fill_window();
}

void SchedClient::forget(JobId id) {
    auto k = keys_.find(id);
    if (k == keys_.end())
        return;
    to_ask_.erase(k->second);
    asked_.erase(k->second);
    keys_.erase(k);
}

void SchedClient::cancel_at_scheduler(JobId id) {
    table_.broker().rpc(Message::request("sched.cancel", {{"id", id}}, 0), [](const Message&) {});
}

void SchedClient::withdraw(JobId id) {
    forget(id);
    if (pending_.erase(id))
        cancel_at_scheduler(id);
    fill_window();
}

void SchedClient::reprioritize(const Job& job) {
    bool asked = pending_.count(job.id) > 0;
    forget(job.id);  // its place in the window depends on the priority
    if (asked && job.priority == 0) {
        pending_.erase(job.id);
        cancel_at_scheduler(job.id);
    } else if (asked) {
        keys_[job.id] = key_of(job);
        asked_.insert(key_of(job));
        table_.broker().rpc(Message::request("sched.prioritize", {{"id", job.id}, {"priority", job.priority}}, 0),
                            [](const Message&) {});
    } else {
        request(job);
    }
    fill_window();
}

void SchedClient::fill_window() {
    while (!to_ask_.empty()) {
        Key best = *to_ask_.begin();
        if (asked_.size() >= table_.limits().sched_window) {
            if (!(best < *asked_.rbegin()))
                return;
            // A better job takes the place of the worst one asked, which
            // waits here again.
            Key worst = *asked_.rbegin();
            asked_.erase(worst);
            pending_.erase(std::get<2>(worst));
            cancel_at_scheduler(std::get<2>(worst));
            to_ask_.insert(worst);
        }
        to_ask_.erase(best);
        const Job* job = table_.find(std::get<2>(best));
        if (!job) {  // (never: a job leaves the window before it is forgotten)
            forget(std::get<2>(best));
            continue;
        }
        asked_.insert(best);
        send_alloc(*job);
    }
}

void SchedClient::send_alloc(const Job& job) {
    uint64_t token = next_token_++;
    pending_[job.id] = token;
    Message req = Message::request("sched.alloc", nlohmann::json::object(), 0);
    req.payload = fmt::format(R"({{"id":{},"priority":{},"t_submit":{},"jobspec":{}}})", job.id, job.priority,
                              job.t_submit, job.sched_jobspec);
    table_.broker().rpc(std::move(req),
                        [this, id = job.id, token](const Message& resp) { on_alloc_response(id, token, resp); });
}

void SchedClient::on_alloc_response(JobId id, uint64_t token, const Message& resp) {
    auto pending = pending_.find(id);
    bool current = pending != pending_.end() && pending->second == token;
    Job* job = table_.find(id);
    auto body = resp.errnum ? Result<nlohmann::json>(make_error(static_cast<int>(resp.errnum), resp.error_text()))
                            : resp.json();
    if (!current || !job || job->state != JobState::sched) {
        // Canceled or held meanwhile: resources granted anyway go back.
        if (body)
            table_.broker().rpc(Message::request("sched.free", {{"id", id}}, 0), [](const Message&) {});
        return;
    }
    pending_.erase(pending);
    forget(id);
    fill_window();
    if (!body)
        return table_.raise(*job, "alloc", body.error().message, 0);
    if (!body->contains("R"))
        return table_.raise(*job, "alloc", "the scheduler answered without R", 0);
    held_.insert(id);
    table_.allocated(*job, std::move((*body)["R"]));
}

void SchedClient::restore(nlohmann::json jobs) {
    for (const auto& j : jobs)
        held_.insert(j["id"].get<JobId>());
    table_.broker().rpc(Message::request("sched.hello", {{"jobs", std::move(jobs)}}, 0), [](const Message& resp) {
        auto body = resp.json();
        if (resp.errnum || !body)
            return log::error("job-manager", "sched.hello: {}", resp.errnum ? resp.error_text() : body.error().message);
        // A job refused here holds nothing at the scheduler: its sched.free
        // is answered ENOENT, logged, and the job goes on to be cleaned.
        auto refused = json_field<nlohmann::json>(*body, "refused", nlohmann::json::array(), "sched.hello");
        if (refused && refused->is_array())
            for (const auto& why : *refused)
                log::error("job-manager", "the scheduler refused a running job's resources: {}",
                           why.is_string() ? why.get<std::string>() : why.dump());
    });
}

void SchedClient::free(JobId id, std::function<void()> done) {
    if (!held_.erase(id))
        return done();
    table_.broker().rpc(Message::request("sched.free", {{"id", id}}, 0),
                        [id, done = std::move(done)](const Message& resp) {
                            if (resp.errnum)
                                log::error("job-manager", "sched.free {}: {}", format_jobid(id), resp.error_text());
                            done();
                        });
}

}  // namespace banyan
