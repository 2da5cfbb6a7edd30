#include "broker/job_manager/recovery.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "broker/job_manager/job_manager.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"

namespace banyan {

Result<void> Recovery::restore() {
    JobDb& db = *jm_.db_;
    auto last = db.read_now([](JobDbReader& r) { return r.max_id(); });
    if (!last)
        return last.error();
    jm_.ids_ = JobIdGenerator(*last);
    auto stored = db.read_now([](JobDbReader& r) { return r.load_all(); });
    if (!stored)
        return stored.error();
    std::vector<JobId> inactive;
    for (auto& s : *stored) {
        Job& job = jm_.jobs_[s.id];
        job.id = s.id;
        job.userid = s.userid;
        job.t_submit = s.t_submit;
        job.next_output_seq = s.next_output_seq;
        job.output_bytes = s.output_bytes;
        // A job whose queue is gone from the config is kept: in the default
        // queue, else in none (the scheduler takes it in its first). It was
        // accepted, and losing it would lose a job.
        // An element's jobspec is its array's: known as an element first
        // (its submit event), it is not read as an array again.
        if (!s.events.empty() && s.events.front().name == "submit")
            job.array_id = json_field<JobId>(json_object_at(s.events.front().context, {"array_of"}), "id", 0)
                               .value_or(0);
        auto spec = parse_json(s.jobspec);
        if (spec && !job.read_jobspec(*spec, jm_.queues_)) {
            nlohmann::json without = *spec;
            if (without.contains("attributes") && without["attributes"].contains("system") &&
                without["attributes"]["system"].is_object())
                without["attributes"]["system"].erase("queue");
            if (!job.read_jobspec(without, jm_.queues_))
                (void)job.read_jobspec(without, NamedQueues{});
        }
        for (const auto& ev : s.events) {
            apply_event(job, ev);
            if (ev.name == "alloc" && ev.context.contains("R"))
                held_R_[job.id] = ev.context["R"].dump();
        }
        // Requeued after it ran (its alloc let go of the scheduler's copy):
        // pending again, or to be once it is clean.
        bool pending = job.state == JobState::depend || job.state == JobState::priority || job.state == JobState::sched;
        if (spec && job.sched_jobspec.empty() && (pending || job.requeue_pending))
            job.reread_jobspec(*spec, jm_.queues_);
        if (job.state != JobState::run && job.state != JobState::cleanup)
            held_R_.erase(job.id);
        if (job.state == JobState::inactive) {
            inactive.push_back(job.id);
            continue;
        }
        job.output_sources = std::move(s.output_sources);  // (after the replay: a `clean` in it drops them)
        if (job.array) {  // its elements to come are made from these
            job.array->jobspec = std::move(s.jobspec);
            auto signature = db.read_now([id = job.id](JobDbReader& r) { return r.signature(id); });
            if (!signature)
                return signature.error();
            job.array->signature = std::move(*signature);
        }
        for (const auto& d : job.dependencies)
            if (job.state == JobState::depend)
                jm_.dependents_.emplace(d.target, job.id);
        if (job.singleton && job.state == JobState::depend)
            jm_.singletons_.insert(job.id);
    }
    // Arrays' active and waiting elements, counted (not events).
    for (const auto& [id, job] : jm_.jobs_)
        if (Job* array = job.array_id && job.state != JobState::inactive ? jm_.find(job.array_id) : nullptr;
            array && array->array) {
            array->array->active++;
            array->array->pending += job.state < JobState::run;
        }
    if (!jm_.jobs_.empty())
        log::info("job-manager", "restored {} jobs ({} inactive)", jm_.jobs_.size(), inactive.size());
    // Their records again (a commit may have died with the last rank 0;
    // one stored already is kept as it is); purgeable once stored.
    if (!inactive.empty())
        jm_.account(inactive, true);
    return {};
}

void Recovery::resume() {
    jm_.instance_running_ = true;
    // The scheduler takes requests in order: these resources are taken
    // before its first pass sees any pending job.
    nlohmann::json holding = nlohmann::json::array();
    for (auto& [id, r_text] : held_R_)
        if (const Job* job = jm_.find(id); job && !job->freed)
            if (auto R = parse_json(r_text)) {
                // A running job's limit changed (jobs.md §7): it holds its
                // resources to the new end, as its time limit runs to.
                if (job->duration_updated && R->contains("execution") && (*R)["execution"].is_object()) {
                    (*R)["execution"]["expiration"] = job->duration > 0 ? std::ceil(job->t_run + job->duration) : 0.0;
                    r_text = R->dump();  // as the scheduler holds it, for a share sent again
                }
                holding.push_back({{"id", id}, {"R", std::move(*R)}});
                if (!job->queue.empty())
                    holding.back()["queue"] = job->queue;
            }
    if (!holding.empty())
        jm_.sched_.restore(std::move(holding));
    IdSet online = jm_.broker_.overlay().subtree().online;
    std::vector<JobId> active;
    for (const auto& [id, job] : jm_.jobs_)
        if (job.state != JobState::inactive) {
            active.push_back(id);
            // Counted against their banks' limits again: all of them, and
            // those holding resources (pending ones as they are asked).
            jm_.banks_.submitted(job);
            if (job.state >= JobState::run && !job.ranks.empty() && !job.freed)
                jm_.banks_.charge(job);
        }
    // Pending jobs get their priorities from the factors now (accounting.md
    // §7), and go to the scheduler, or wait under a limit, best first.
    for (JobId id : active)
        if (Job* job = jm_.find(id); job && job->state == JobState::sched && job->priority > 0) {
            job->priority = jm_.priority_of(*job);
            job->summary_cache.clear();
        }
    std::stable_partition(active.begin(), active.end(),
                          [this](JobId id) { return jm_.find(id)->state != JobState::sched; });
    auto first_pending = std::find_if(active.begin(), active.end(),
                                      [this](JobId id) { return jm_.find(id)->state == JobState::sched; });
    std::stable_sort(first_pending, active.end(), [this](JobId a, JobId b) {
        const Job *x = jm_.find(a), *y = jm_.find(b);
        return std::tuple(-x->priority, x->t_submit, a) < std::tuple(-y->priority, y->t_submit, b);
    });
    size_t reattached = 0;
    for (JobId id : active) {
        Job* job = jm_.find(id);
        if (!job)
            continue;
        // A job in CLEANUP without its finish may still have tasks ending.
        bool tasks_may_run = job->state == JobState::run || (job->state == JobState::cleanup && !job->status);
        if (tasks_may_run && !job->ranks.empty()) {
            if (job->state == JobState::run) {
                IdSet ranks;
                for (uint32_t rank : job->ranks)
                    ranks.insert(rank);
                jm_.post(*job, "reattach", {{"ranks", ranks.format()}});
            }
            auto R = held_R_.find(id);
            jm_.exec_.reattach(*job, online, R != held_R_.end() ? R->second : "");
            if (job->state == JobState::cleanup)
                jm_.exec_.terminate(*job);  // its SIGKILL escalation died with the old rank 0
            ++reattached;
        } else {
            jm_.advance(*job);
        }
    }
    held_R_.clear();
    if (reattached > 0)
        log::info("job-manager", "re-attaching the tasks of {} jobs", reattached);
    ranks_changed();
    jm_.purger_.purge(wall_now());
}

// A rank that comes (back) online may still run jobs that ended here while
// it was cut off (node-failure): it keeps only those that run here, and
// the jobs that waited for it ask it for their shares again. Not before
// resume(): until then nothing is known to run.
void Recovery::ranks_changed() {
    if (!jm_.instance_running_)
        return;
    IdSet online = jm_.broker_.overlay().subtree().online;
    IdSet joined = online.difference(known_online_);
    known_online_ = online;
    jm_.exec_.reconcile(joined);
    jm_.exec_.ranks_back(joined);
}

}  // namespace banyan
