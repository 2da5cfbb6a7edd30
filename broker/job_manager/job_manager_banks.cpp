// Banks, their limits and priority (doc/spec/accounting.md §5-8): the
// table from the accounting service, jobs that wait under a limit, and
// each pending job's priority from its factors.
#include <algorithm>

#include <fmt/format.h>

#include "broker/job_manager/job_manager.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"

namespace banyan {
namespace {

// Jobs looked at per loop turn when priorities are recomputed.
constexpr size_t kRecomputeSlice = 5000;

}  // namespace

Result<void> JobManager::load_banks() {
    // The accounting service answers from memory, before rpc() returns.
    Result<void> loaded = make_error(ENOSYS, "accounting.banks: no answer from the accounting service");
    broker_.rpc(Message::request("accounting.banks", nlohmann::json::object(), 0), [&](const Message& resp) {
        auto body = resp.errnum ? Result<nlohmann::json>(make_error(static_cast<int>(resp.errnum), resp.error_text()))
                                : resp.json();
        auto table = body ? BankTable::from_json(*body) : Result<BankTable>(body.error());
        if (!table) {
            loaded = make_error(table.error().code, "accounting.banks: " + table.error().message);
            return;
        }
        banks_.set(std::move(*table));
        loaded = {};
    });
    if (loaded && priority_.weight_age > 0) {
        // Age grows by itself: looked at again every recalc-interval.
        auto every = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(priority_.recalc_interval));
        recalc_.start_repeating(every, [this] { recompute_priorities(); });
    }
    return loaded;
}

int64_t JobManager::priority_of(const Job& job, PriorityFactors* out) const {
    PriorityFactors f;
    f.fairshare = banks_.fairshare(job.userid, job.bank);
    f.urgency = static_cast<double>(job.urgency) / kMaxUrgency;
    if (job.t_eligible > 0)
        f.age = std::min(1.0, std::max(0.0, wall_now() - job.t_eligible) / priority_.max_age);
    if (top_queue_priority_ > 0)
        if (const NamedQueue* q = queues_.find(job.queue))
            f.queue = static_cast<double>(q->priority) / static_cast<double>(top_queue_priority_);
    f.size = std::min(1.0, std::max<double>(1, job.nnodes) / std::max<uint32_t>(1, broker_.bootstrap().size));
    if (out)
        *out = f;
    return combine_priority(priority_, job.urgency, f);
}

void JobManager::to_scheduler(Job& job) {
    if (job.priority == 0 || job.state != JobState::sched)
        return;  // held: asked for once its urgency rises
    if (job.array)
        return make_elements(job);  // an array is never asked for: its elements are
    if (!banks_.charged(job.id)) {
        if (std::string why = banks_.over_running(job); !why.empty()) {
            if (job.limit != why) {
                job.limit = std::move(why);
                job.summary_cache.clear();
            }
            banks_.wait(job);
            return;
        }
        banks_.charge(job);
    }
    if (!job.limit.empty()) {
        job.limit.clear();
        job.summary_cache.clear();
    }
    sched_.request(job);
}

void JobManager::left_scheduler(Job& job) {
    if (banks_.unwait(job.id)) {
        job.limit.clear();
        job.summary_cache.clear();
    }
    if (auto top = banks_.uncharge(job.id))
        retry_waiting(top);
}

void JobManager::retry_waiting(const std::optional<std::string>& top) {
    for (JobId id : banks_.waiting(top)) {
        Job* job = find(id);
        if (!job) {
            banks_.unwait(id);
            continue;
        }
        if (!banks_.over_running(*job).empty())
            continue;  // (its reason may name another limit now: kept until it goes)
        banks_.unwait(id);
        to_scheduler(*job);
    }
}

void JobManager::recompute_priorities() {
    recompute_from_ = 0;
    if (!recompute_next_.active())
        recompute_slice();
}

void JobManager::recompute_slice() {
    auto it = jobs_.lower_bound(recompute_from_);
    for (size_t seen = 0; it != jobs_.end() && seen < kRecomputeSlice; ++it, ++seen) {
        auto& [id, job] = *it;
        if (job.state != JobState::sched || job.priority == 0)
            continue;
        int64_t p = priority_of(job);
        if (p == job.priority)
            continue;
        // Not an event: it follows from the factors (accounting.md §7).
        job.priority = p;
        job.summary_cache.clear();
        if (banks_.is_waiting(id))
            banks_.wait(job);  // its new place among those waiting
        else if (sched_.is_known(id))
            sched_.reprioritize(job);  // (one not yet routed goes in its order when it is)
    }
    if (it != jobs_.end()) {
        recompute_from_ = it->first;
        recompute_next_.start(Duration::zero(), [this] { recompute_slice(); });
        return;
    }
    retry_waiting();
}

// job-manager.banks: the accounting service's table, after every change
// and every fair-share computation.
void JobManager::on_banks(const Message& req) {
    auto body = req.json();
    if (!body)
        return broker_.respond_error(req, EPROTO, body.error().message);
    auto table = BankTable::from_json(*body);
    if (!table)
        return broker_.respond_error(req, EPROTO, table.error().message);
    banks_.set(std::move(*table));
    recompute_priorities();
    broker_.respond(Message::response_to(req, nlohmann::json::object()));
}

// job-manager.priority {id}: its priority and the factors it comes from.
void JobManager::on_priority(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    PriorityFactors f;
    int64_t now = priority_of(*job, &f);
    nlohmann::json answer = {{"id", job->id},
                             {"priority", job->state == JobState::sched ? job->priority : now},
                             {"bank", job->bank},
                             {"urgency", job->urgency},
                             {"factors", f.to_json()},
                             {"weights", priority_.weights_json()}};
    if (!job->limit.empty())
        answer["limit"] = job->limit;
    broker_.respond(Message::response_to(req, std::move(answer)));
}

}  // namespace banyan
