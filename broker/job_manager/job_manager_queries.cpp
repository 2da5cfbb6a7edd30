// The job manager's read-only requests (doc/spec/jobs.md §7):
// job-manager.list, info, eventlog, attach, wait, wait-all, stats and the
// queues' listing. Jobs in every state; nothing here changes one.
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
    // Running profiled jobs' totals (doc/spec/profiling.md §6), for /metrics.
    nlohmann::json profiled = nlohmann::json::object();
    for (const auto& [id, live] : profiles_.live())
        if (const Job* j = find(id); j && j->state == JobState::run)
            profiled[format_jobid(id)] = live.totals().to_json();
    broker_.respond(Message::response_to(
        req, {{"states", states},
              {"profiles", std::move(profiled)},
              {"queues", std::move(by_queue)},
              {"submitted", counters_.submitted},
              {"started", counters_.started},
              {"completed", counters_.completed},
              {"results", counters_.by_result},
              {"demand", {{"nodes", demand_nodes}, {"cores", demand_cores}, {"gpus", demand_gpus}}},
              {"commit", db_->commit_latency().to_json()}}));
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
            // The R of its run; none while pending (a requeued job's last
            // run is over).
            if (it->second.state >= JobState::run)
                for (const auto& ev : stored->second)
                    if (ev.name == "alloc" && ev.context.contains("R"))
                        out["R"] = ev.context["R"];
            broker_.respond(Message::response_to(req, out));
        });
}

void JobManager::on_eventlog(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    // Read once every event posted so far is on disk: the log then holds
    // each one that a job-manager.events stream subscribed just before
    // this request misses (posted before it, committed after; the HTTP
    // API's stream of one job is that pair).
    db_->after_commit([this, req, id = job->id] {
        db_->read([id](JobDbReader& reader) { return reader.events(id, 0); },
                  [this, req](const Result<std::vector<JobEvent>>& events) {
                      if (!events)
                          return broker_.respond_error(req, EIO, events.error().message);
                      nlohmann::json list = nlohmann::json::array();
                      for (const auto& ev : *events)
                          list.push_back(ev.to_json());
                      broker_.respond(Message::response_to(req, {{"events", std::move(list)}}));
                  });
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

// A job's eBPF profile (doc/spec/profiling.md §6): from memory while it
// runs, from the database once it has ended.
void JobManager::on_profile_get(const Message& req) {
    nlohmann::json body;
    Job* job = visible_job(req, body);
    if (!job)
        return;
    if (!job->ebpf)
        return broker_.respond_error(
            req, EINVAL, fmt::format("{}: the job was not profiled (--profile-ebpf)", format_jobid(job->id)));
    nlohmann::json programs = json_array_at(*job->ebpf, "programs");
    if (job->state != JobState::inactive) {
        nlohmann::json ranks = nlohmann::json::object(), series = nlohmann::json::array();
        if (const auto* live = profiles_.find(job->id)) {
            for (const auto& [rank, data] : live->ranks)
                ranks[std::to_string(rank)] = data;
            series = JobProfiles::series_json(*live);
        }
        return broker_.respond(Message::response_to(
            req, {{"programs", programs}, {"ranks", ranks}, {"series", series}, {"complete", false}}));
    }
    // Inactive: its last writes may still be committing.
    size_t nranks = job->ranks.size();
    db_->after_commit([this, req, id = job->id, nranks, programs] {
        db_->read([id](JobDbReader& reader) { return reader.profiles(id); },
                  [this, req, nranks, programs](const Result<std::vector<std::pair<int64_t, std::string>>>& rows) {
                      if (!rows)
                          return broker_.respond_error(req, EIO, rows.error().message);
                      nlohmann::json ranks = nlohmann::json::object(), series = nlohmann::json::array();
                      for (const auto& [rank, text] : *rows) {
                          auto data = parse_json(text);
                          if (!data)
                              continue;  // (written by this program: not expected)
                          if (rank < 0)
                              series = std::move(*data);
                          else
                              ranks[std::to_string(rank)] = std::move(*data);
                      }
                      bool complete = nranks > 0 && ranks.size() >= nranks;  // (never allocated: nothing to complete)
                      broker_.respond(Message::response_to(
                          req,
                          {{"programs", programs}, {"ranks", ranks}, {"series", series}, {"complete", complete}}));
                  });
    });
}

}  // namespace banyan
