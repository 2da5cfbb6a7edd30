#include "broker/job_manager/job_manager.hpp"

#include <malloc.h>

#include <csignal>
#include <ctime>

#include <fmt/format.h>

#include "core/json_parse.hpp"
#include "core/log.hpp"
#include "resource/rv1.hpp"

namespace banyan {
namespace {

constexpr auto kPurgePeriod = std::chrono::seconds(60);

}  // namespace

Result<std::unique_ptr<JobManager>> JobManager::start(Broker& broker) {
    std::unique_ptr<JobManager> jm(new JobManager(broker));
    if (broker.bootstrap().rank != 0)
        return jm;
    const Config& config = broker.bootstrap().config;
    auto age = config.get_int("job-manager.inactive-age", 0, int64_t{1} << 40, 7 * 86400);
    if (!age)
        return age.error();
    auto limit = config.get_int("job-manager.inactive-limit", 0, int64_t{1} << 32, 10000);
    if (!limit)
        return limit.error();
    auto output_limit = config.get_int("job-manager.output-limit", 0, int64_t{1} << 40, int64_t{16} << 20);
    if (!output_limit)
        return output_limit.error();
    jm->output_limit_ = static_cast<uint64_t>(*output_limit);
    auto window = config.get_int("job-manager.sched-window", 1, 1'000'000, 4096);
    if (!window)
        return window.error();
    jm->sched_window_ = static_cast<size_t>(*window);
    jm->inactive_age_ = static_cast<double>(*age);
    jm->inactive_limit_ = static_cast<size_t>(*limit);
    auto db = JobDb::open(broker.reactor(), broker.bootstrap().statedir);
    if (!db)
        return db.error();
    jm->db_ = std::move(*db);
    if (auto r = jm->restore(); !r)
        return r.error();
    jm->db_->on_commit([p = jm.get()] { p->wake_watchers(); });
    jm->db_->on_dropped([p = jm.get()](const std::vector<JobId>& ids, const Error& e) { p->drop_unstored(ids, e); });
    jm->register_methods();
    broker.when_running([p = jm.get()] { p->resume_after_restart(); });
    broker.add_subtree_listener([p = jm.get()] { p->reconcile_joined_ranks(); });
    jm->purge_timer_.start_repeating(kPurgePeriod, [p = jm.get()] { p->purge(wall_now()); });
    return jm;
}

JobManager::JobManager(Broker& broker)
    : broker_(broker), purge_timer_(broker.reactor()), purge_soon_(broker.reactor()) {}

JobManager::~JobManager() = default;

// Rebuilds every job from its jobspec and eventlog.
Result<void> JobManager::restore() {
    auto last = db_->read_now([](JobDbReader& r) { return r.max_id(); });
    if (!last)
        return last.error();
    ids_ = JobIdGenerator(*last);
    auto stored = db_->read_now([](JobDbReader& r) { return r.load_all(); });
    if (!stored)
        return stored.error();
    for (auto& s : *stored) {
        Job& job = jobs_[s.id];
        job.id = s.id;
        job.userid = s.userid;
        job.t_submit = s.t_submit;
        job.next_output_seq = s.next_output_seq;
        job.output_bytes = s.output_bytes;
        if (auto spec = parse_json(s.jobspec))
            (void)job.read_jobspec(*spec);
        for (const auto& ev : s.events)
            apply_event(job, ev);
        if (job.state == JobState::inactive) {
            add_inactive(job);
            continue;
        }
        for (const auto& d : job.dependencies)
            if (job.state == JobState::depend)
                dependents_.emplace(d.target, job.id);
    }
    for (auto& [user, jobs] : inactive_)
        std::sort(jobs.begin(), jobs.end());
    if (!jobs_.empty())
        log::info("job-manager", "restored {} jobs ({} inactive)", jobs_.size(), inactive_count_);
    return {};
}

// Once the instance runs (the scheduler has its graph), every active job
// goes on from where the database left it.
void JobManager::resume_after_restart() {
    instance_running_ = true;
    std::vector<JobId> active;
    for (const auto& [id, job] : jobs_)
        if (job.state != JobState::inactive)
            active.push_back(id);
    for (JobId id : active) {
        auto it = jobs_.find(id);
        if (it == jobs_.end())
            continue;
        Job& job = it->second;
        if (job.state == JobState::run) {
            // Its shells on other ranks may still run: end them, then
            // report. (Rank 0's own shell ended its tasks when the broker
            // died: see doc/spec/jobdb.md, On start.)
            signal_ranks(job, SIGKILL);
            raise(job, "restart", "rank 0 restarted while the job ran; its tasks could not be re-attached", 0);
        } else {
            advance(job);
        }
    }
    purge(wall_now());
}

// A rank that comes (back) online may still run jobs that ended here while
// it was cut off (node-failure): it keeps only those that run here.
void JobManager::reconcile_joined_ranks() {
    IdSet online = broker_.overlay().subtree().online;
    IdSet joined = online.difference(known_online_);
    known_online_ = online;
    joined.for_each([this](uint32_t rank) {
        if (rank == 0)
            return;
        nlohmann::json keep = nlohmann::json::array();
        // Still executing and not failed (a lost rank fails its job at
        // once, while its other ranks may take a while to end); a job
        // ending on its own keeps its grace period (exec.kill-timeout).
        for (const auto& [id, ex] : executing_)
            if (auto it = jobs_.find(id); it != jobs_.end() && !ex.failed)
                if (std::find(it->second.ranks.begin(), it->second.ranks.end(), rank) != it->second.ranks.end())
                    keep.push_back(id);
        broker_.rpc(Message::request("exec.reconcile", {{"keep", keep}}, rank), [rank](const Message& resp) {
            if (resp.errnum)
                log::warning("job-manager", "exec.reconcile on rank {}: {}", rank, resp.error_text());
        });
    });
}

void JobManager::respond_once_stored(Message response) {
    db_->after_commit([this, response = std::move(response)]() mutable { broker_.respond(std::move(response)); });
}

void JobManager::post(Job& job, std::string name, nlohmann::json context) {
    JobEvent ev{wall_now(), std::move(name), std::move(context)};
    db_->add_event(job.id, job.next_event_seq, ev);
    JobState from = job.state;
    apply_event(job, ev);
    if (ev.name == "start")
        dependencies_changed(job);
    if (job.state != from)
        on_state_change(job, from);
}

void JobManager::on_state_change(Job& job, JobState from) {
    if (job.state == JobState::cleanup) {
        if (from == JobState::sched) {
            withdraw(job.id);
            fill_window();
        }
        if (from == JobState::run && executing_.count(job.id))  // SIGTERM, then SIGKILL (exec.kill-timeout)
            for (uint32_t rank : job.ranks)
                broker_.rpc(Message::request("exec.terminate", {{"id", job.id}}, rank), [](const Message&) {});
    }
    if (job.state == JobState::inactive) {
        became_inactive(job);
        return;
    }
    advance(job);
}

// Takes the next step a job in its state can take by itself.
void JobManager::advance(Job& job) {
    if (!instance_running_)
        return;
    switch (job.state) {
        case JobState::depend:
            return check_dependencies(job);
        case JobState::priority:
            return post(job, "priority", {{"priority", priority_from_urgency(job.urgency)}});
        case JobState::sched:
            return request_alloc(job);
        case JobState::run:
            return;  // exec answers move it on
        case JobState::cleanup:
            return release(job);
        case JobState::inactive:
            return;
    }
}

void JobManager::check_dependencies(Job& job) {
    if (job.begin_time > wall_now()) {
        // Looked at again then (a timer per waiting job; asio keeps them
        // in a heap).
        auto& timer = begin_timers_[job.id];
        if (!timer)
            timer = std::make_unique<Timer>(broker_.reactor());
        timer->start(delay_until(job.begin_time), [this, id = job.id] {
            begin_timers_.erase(id);  // this callback's timer: its state lives until the call returns
            if (auto it = jobs_.find(id); it != jobs_.end() && it->second.state == JobState::depend)
                check_dependencies(it->second);
        });
        return;
    }
    for (const auto& d : job.dependencies) {
        auto it = jobs_.find(d.target);
        if (it == jobs_.end())
            return raise(job, "dependency",
                         fmt::format("{}:{}: that job is no longer known", d.scheme, format_jobid(d.target)), 0);
        const Job& t = it->second;
        bool ended = t.state == JobState::inactive;
        bool completed = t.result() == "completed";
        bool met = d.scheme == "afterstart" ? t.started
                   : d.scheme == "afterany" ? ended
                   : d.scheme == "afterok"  ? ended && completed
                                            : ended && !completed;
        bool never = !met && ended;
        if (never)
            return raise(job, "dependency",
                         fmt::format("{}:{} can never be met: that job ended {}{}", d.scheme, format_jobid(d.target),
                                     t.result(), t.started ? "" : " without starting"),
                         0);
        if (!met)
            return;
    }
    post(job, "depend");
}

void JobManager::dependencies_changed(const Job& target) {
    auto [first, last] = dependents_.equal_range(target.id);
    std::vector<JobId> waiting;
    for (auto it = first; it != last; ++it)
        waiting.push_back(it->second);
    if (target.state == JobState::inactive)
        dependents_.erase(first, last);
    for (JobId id : waiting)
        if (auto it = jobs_.find(id); it != jobs_.end() && it->second.state == JobState::depend && !unstored_.count(id))
            check_dependencies(it->second);  // one not yet on disk goes on once it is (on_submit)
}

void JobManager::raise(Job& job, std::string type, std::string note, uint32_t userid) {
    if (job.state == JobState::inactive)
        return;
    post(job, "exception", {{"type", std::move(type)}, {"severity", 0}, {"note", std::move(note)}, {"userid", userid}});
}

void JobManager::set_urgency(Job& job, int urgency, uint32_t userid) {
    post(job, "urgency", {{"userid", userid}, {"urgency", urgency}});
    if (job.state != JobState::sched)
        return;  // the priority event comes when it gets there
    bool asked = alloc_pending_.count(job.id) > 0;
    forget(job.id);  // its place in the window depends on the priority
    int64_t priority = priority_from_urgency(urgency);
    post(job, "priority", {{"priority", priority}});
    if (asked && priority == 0) {
        alloc_pending_.erase(job.id);
        broker_.rpc(Message::request("sched.cancel", {{"id", job.id}}, 0), [](const Message&) {});
    } else if (asked) {
        sched_keys_[job.id] = sched_key(job);
        asked_.insert(sched_key(job));
        broker_.rpc(Message::request("sched.prioritize", {{"id", job.id}, {"priority", priority}}, 0),
                    [](const Message&) {});
    } else {
        request_alloc(job);
    }
    fill_window();
}

// The scheduler is asked about the best `sched_window_` pending jobs only
// (priority, then submit time): at 100,000 pending jobs it would otherwise
// hold them all, ~2.5 KB each. The rest wait here, in order.
JobManager::SchedKey JobManager::sched_key(const Job& job) { return {-job.priority, job.t_submit, job.id}; }

void JobManager::request_alloc(Job& job) {
    if (job.priority == 0 || sched_keys_.count(job.id))
        return;  // held, or waiting or asked already
    sched_keys_[job.id] = sched_key(job);
    to_ask_.insert(sched_key(job));
    fill_window();
}

void JobManager::forget(JobId id) {
    auto k = sched_keys_.find(id);
    if (k == sched_keys_.end())
        return;
    to_ask_.erase(k->second);
    asked_.erase(k->second);
    sched_keys_.erase(k);
}

void JobManager::withdraw(JobId id) {
    forget(id);
    if (alloc_pending_.erase(id))
        broker_.rpc(Message::request("sched.cancel", {{"id", id}}, 0), [](const Message&) {});
}

void JobManager::fill_window() {
    while (!to_ask_.empty()) {
        SchedKey best = *to_ask_.begin();
        if (asked_.size() >= sched_window_) {
            if (!(best < *asked_.rbegin()))
                return;
            // A better job takes the place of the worst one asked, which
            // waits here again.
            SchedKey worst = *asked_.rbegin();
            asked_.erase(worst);
            alloc_pending_.erase(std::get<2>(worst));
            broker_.rpc(Message::request("sched.cancel", {{"id", std::get<2>(worst)}}, 0), [](const Message&) {});
            to_ask_.insert(worst);
        }
        to_ask_.erase(best);
        asked_.insert(best);
        send_alloc(jobs_.at(std::get<2>(best)));
    }
}

void JobManager::send_alloc(const Job& job) {
    uint64_t token = next_alloc_token_++;
    alloc_pending_[job.id] = token;
    Message req = Message::request("sched.alloc", nlohmann::json::object(), 0);
    req.payload = fmt::format(R"({{"id":{},"priority":{},"t_submit":{},"jobspec":{}}})", job.id, job.priority,
                              job.t_submit, job.sched_jobspec);
    broker_.rpc(std::move(req),
                [this, id = job.id, token](const Message& resp) { on_alloc_response(id, token, resp); });
}

void JobManager::on_alloc_response(JobId id, uint64_t token, const Message& resp) {
    auto pending = alloc_pending_.find(id);
    bool current = pending != alloc_pending_.end() && pending->second == token;
    auto it = jobs_.find(id);
    auto body = resp.errnum ? Result<nlohmann::json>(make_error(static_cast<int>(resp.errnum), resp.error_text()))
                            : resp.json();
    if (!current || it == jobs_.end() || it->second.state != JobState::sched) {
        // Canceled or held meanwhile: resources granted anyway go back.
        if (body)
            broker_.rpc(Message::request("sched.free", {{"id", id}}, 0), [](const Message&) {});
        return;
    }
    alloc_pending_.erase(pending);
    forget(id);
    fill_window();
    Job& job = it->second;
    if (!body)
        return raise(job, "alloc", body.error().message, 0);
    if (!body->contains("R"))
        return raise(job, "alloc", "the scheduler answered without R", 0);
    held_by_sched_.insert(id);
    nlohmann::json R = (*body)["R"];
    post(job, "alloc", {{"R", R}});
    // Nothing starts before the event that allows it is on disk: a crash
    // between the two would run the job again after the restart.
    db_->after_commit([this, id, R = std::move(R)] {
        if (auto found = jobs_.find(id); found != jobs_.end() && found->second.state == JobState::run)
            launch(found->second, R);
    });
}

void JobManager::launch(Job& job, const nlohmann::json& R) {
    auto r = Rv1::from_json(R);
    if (!r || r->ranks.empty())
        return raise(job, "exec", "the allocation has no ranks", 0);
    // Counted and timed before anything is sent: the exec service of this
    // rank answers (and reports started) within broker_.rpc, and the last
    // answer ends the execution.
    Execution& ex = executing_[job.id];
    ex.ranks_left = ex.ranks_starting = r->ranks.size();
    double end = r->expiration > 0 ? r->expiration : job.duration > 0 ? wall_now() + job.duration : 0;
    if (end > 0) {
        ex.time_limit = std::make_unique<Timer>(broker_.reactor());
        ex.time_limit->start(delay_until(end), [this, id = job.id] {
            if (auto it = jobs_.find(id); it != jobs_.end() && it->second.state == JobState::run)
                raise(it->second, "timeout", "the job reached its time limit", 0);
        });
    }
    ex.end = end;
    std::vector<uint32_t> ranks;
    for (const auto& [rank, children] : r->ranks)
        ranks.push_back(rank);
    // The jobspec is read from the database (a pending job does not keep
    // it in memory), on the reader thread.
    db_->read([id = job.id](JobDbReader& reader) { return reader.jobspec(id); },
              [this, id = job.id, ranks = std::move(ranks), r_text = R.dump()](Result<std::string> spec) {
                  send_exec_run(id, ranks, r_text, spec);
              });
}

void JobManager::send_exec_run(JobId id, const std::vector<uint32_t>& ranks, const std::string& r_text,
                               const Result<std::string>& spec) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !executing_.count(id))
        return;
    Job& job = it->second;
    if (job.state != JobState::run || !spec) {
        // Ended while its jobspec was read (cancel, time limit), or not
        // readable: nothing was started.
        executing_.erase(id);
        if (job.state == JobState::run)
            return raise(job, "exec", spec.error().message, 0);  // its cleanup follows
        return release(job);
    }
    executing_.at(id).sent = true;
    for (uint32_t rank : ranks) {
        // Written as text: the jobspec goes on as stored, unparsed.
        Message req = Message::request("exec.run", nlohmann::json::object(), rank);
        req.payload = fmt::format(R"({{"id":{},"userid":{},"R":{},"jobspec":{}}})", id, job.userid, r_text, *spec);
        broker_.rpc(std::move(req), [this, id](const Message& resp) { on_exec_response(id, resp); });
    }
    // `banyan job kill` before the tasks could be reached: now (each rank
    // reads its exec.run first).
    if (auto pending = pending_signals_.find(id); pending != pending_signals_.end()) {
        auto signals = std::move(pending->second);
        pending_signals_.erase(pending);
        for (int signo : signals)
            if (job.state == JobState::run)  // a launch that failed at once has ended it
                signal_ranks(job, signo);
    }
}

void JobManager::on_exec_response(JobId id, const Message& resp) {
    auto ex_it = executing_.find(id);
    auto it = jobs_.find(id);
    if (ex_it == executing_.end() || it == jobs_.end())
        return;
    Execution& ex = ex_it->second;
    Job& job = it->second;
    auto body = resp.errnum ? Result<nlohmann::json>(make_error(static_cast<int>(resp.errnum), resp.error_text()))
                            : resp.json();
    if (!body) {
        ex.failed = true;
        raise(job, body.error().code == EHOSTUNREACH ? "node-failure" : "exec", body.error().message, 0);
    } else {
        ex.max_status = std::max(ex.max_status, body->value("status", 0));
    }
    if (--ex.ranks_left > 0)
        return;
    bool failed = ex.failed;
    int status = ex.max_status;
    executing_.erase(ex_it);
    if (!failed)
        post(job, "finish", {{"status", status}});
    if (job.state == JobState::cleanup)
        release(job);
}

void JobManager::signal_ranks(const Job& job, int signo) {
    for (uint32_t rank : job.ranks)
        broker_.rpc(Message::request("exec.kill", {{"id", job.id}, {"signal", signo}}, rank), [](const Message&) {});
}

// CLEANUP: once no task runs, resources go back and the job is done.
void JobManager::release(Job& job) {
    if (job.state != JobState::cleanup || executing_.count(job.id))
        return;
    if (held_by_sched_.count(job.id)) {
        held_by_sched_.erase(job.id);
        broker_.rpc(Message::request("sched.free", {{"id", job.id}}, 0), [this, id = job.id](const Message& resp) {
            if (resp.errnum)
                log::error("job-manager", "sched.free {}: {}", format_jobid(id), resp.error_text());
            if (auto it = jobs_.find(id); it != jobs_.end() && it->second.state == JobState::cleanup) {
                post(it->second, "free");
                post(it->second, "clean");
            }
        });
        return;
    }
    if (!job.ranks.empty() && !job.freed)
        post(job, "free", {{"note", "the scheduler that gave these resources is gone (restart)"}});
    post(job, "clean");
}

void JobManager::became_inactive(Job& job) {
    begin_timers_.erase(job.id);
    pending_signals_.erase(job.id);
    job.dependencies.clear();
    dependencies_changed(job);
    add_inactive(job);
    // Waits are answered once the clean event is on disk.
    auto [first, last] = wait_watches_.equal_range(job.id);
    for (auto it = first; it != last; ++it)
        respond_once_stored(Message::response_to(it->second, wait_answer(job)));
    wait_watches_.erase(first, last);
    // Not now: callers up the stack still hold this job.
    if (!purge_soon_.active())
        purge_soon_.start(Duration::zero(), [this] { purge(wall_now()); });
}

void JobManager::add_inactive(const Job& job) {
    inactive_[job.userid].emplace_back(job.t_inactive, job.id);
    ++inactive_count_;
}

void JobManager::purge(double now) {
    auto remove_oldest = [this](std::deque<std::pair<double, JobId>>& jobs) {
        JobId id = jobs.front().second;
        jobs.pop_front();
        --inactive_count_;
        jobs_.erase(id);
        db_->remove_job(id);
    };
    for (auto user = inactive_.begin(); user != inactive_.end();) {
        auto& jobs = user->second;
        while (!jobs.empty() && now - jobs.front().first > inactive_age_)
            remove_oldest(jobs);
        user = jobs.empty() ? inactive_.erase(user) : std::next(user);
    }
    while (inactive_count_ > inactive_limit_) {
        auto most = std::max_element(inactive_.begin(), inactive_.end(), [](const auto& x, const auto& y) {
            return x.second.size() < y.second.size();
        });
        remove_oldest(most->second);
        if (most->second.empty())
            inactive_.erase(most);
    }
    // Once the queue drains, the memory its jobs held goes back to the
    // system (malloc keeps freed heap otherwise): a broker that ran 100,000
    // jobs is as small as one that ran 10,000.
    if (jobs_.size() == inactive_count_ && !trimmed_) {
        malloc_trim(0);
        trimmed_ = true;
    } else if (jobs_.size() != inactive_count_) {
        trimmed_ = false;
    }
}

}  // namespace banyan
