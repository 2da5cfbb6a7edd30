#include "broker/job_manager/job_manager.hpp"

#include <fmt/format.h>

#include "broker/job_manager/signature_check.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"

namespace banyan {

namespace {
// Usage records are sent to the accounting store this long after the
// first of them is ready (accounting.md §3).
constexpr auto kAccountEvery = std::chrono::milliseconds(100);
}  // namespace

Result<std::unique_ptr<JobManager>> JobManager::start(Broker& broker) {
    if (broker.bootstrap().rank != 0)
        return std::unique_ptr<JobManager>(new JobManager(broker, {}, nullptr));
    const Config& config = broker.bootstrap().config;
    auto age = config.get_int("job-manager.inactive-age", 0, int64_t{1} << 40, 7 * 86400);
    auto limit = config.get_int("job-manager.inactive-limit", 0, int64_t{1} << 32, 10000);
    auto output_limit = config.get_int("job-manager.output-limit", 0, int64_t{1} << 40, int64_t{16} << 20);
    auto window = config.get_int("job-manager.sched-window", 1, 1'000'000, 4096);
    auto max_active = config.get_int("job-manager.max-active-per-user", 0, int64_t{1} << 32, 0);
    // A default bound: one user's script gone wrong must not fill rank 0.
    auto max_pending = config.get_int("job-manager.max-pending-per-user", 0, int64_t{1} << 32, 10000);
    auto max_array_size = config.get_int("job-manager.max-array-size", 1, 10'000'000, 100'000);
    auto max_array_index = config.get_int("job-manager.max-array-index", 0, IdSet::kMaxId, 9'999'999);
    auto mail_program = config.get_string("job-manager.mail-program", "/usr/sbin/sendmail");
    if (!mail_program)
        return mail_program.error();
    if (auto e = first_error(age, limit, output_limit, window, max_active, max_pending, max_array_size, max_array_index))
        return *e;
    JobManagerLimits limits{.inactive_age = static_cast<double>(*age),
                            .inactive_limit = static_cast<size_t>(*limit),
                            .output_limit = static_cast<uint64_t>(*output_limit),
                            .sched_window = static_cast<size_t>(*window),
                            .max_active_per_user = static_cast<size_t>(*max_active),
                            .max_pending_per_user = static_cast<size_t>(*max_pending),
                            .arrays = {static_cast<uint64_t>(*max_array_size), static_cast<uint32_t>(*max_array_index)},
                            .signed_jobs = config.has("exec.imp")};
    auto queue_policy = queue_policy_from_name(config.get_string("sched.queue-policy", "easy").value_or("easy"));
    auto queues = NamedQueues::read(config, queue_policy.value_or(QueuePolicy::easy));
    if (!queues)
        return queues.error();
    auto db = JobDb::open(broker.reactor(), broker.bootstrap().statedir);
    if (!db)
        return db.error();
    auto priority = PrioritySettings::read(config);
    if (!priority)
        return priority.error();
    auto profiling = ProfilingPolicy::from_config(config);
    if (!profiling)
        return profiling.error();
    std::unique_ptr<JobManager> jm(new JobManager(broker, limits, std::move(*db)));
    jm->queues_ = std::move(*queues);
    jm->mailer_ = std::make_unique<Mailer>(broker.reactor(), *mail_program);
    std::map<std::string, std::string> disabled;
    auto queue_states =
        QueueStates::open(broker.reactor(), broker.bootstrap().statedir, QueueStates::Kind::disabled, disabled);
    if (!queue_states)
        return queue_states.error();
    jm->queue_states_ = std::move(*queue_states);
    // Disabled before a restart: disabled still.
    for (auto& [name, reason] : disabled) {
        if (!jm->queues_.find(name)) {
            log::warning("job-manager", "queue {} was disabled but is not configured now; ignored", name);
            continue;
        }
        log::info("job-manager", "queue {} is disabled{}{}", name, reason.empty() ? "" : ": ", reason);
        jm->disabled_[name] = std::move(reason);
    }
    jm->priority_ = *priority;
    jm->profiling_ = std::move(*profiling);
    for (const auto& q : jm->queues_.queues)
        jm->top_queue_priority_ = std::max(jm->top_queue_priority_, q.priority);
    if (auto r = jm->load_banks(); !r)
        return r.error();
    if (auto r = jm->recovery_.restore(); !r)
        return r.error();
    JobManager* p = jm.get();
    jm->db_->on_commit([p] { p->watchers_.committed(); });
    jm->db_->on_dropped([p](const std::vector<JobId>& ids, const Error& e) { p->drop_unstored(ids, e); });
    jm->register_methods();
    broker.when_running([p] { p->recovery_.resume(); });
    broker.add_subtree_listener([p] { p->recovery_.ranks_changed(); });
    jm->purger_.start();
    return jm;
}

JobManager::JobManager(Broker& broker, const JobManagerLimits& limits, std::unique_ptr<JobDb> db)
    : broker_(broker),
      db_(std::move(db)),
      limits_(limits),
      sched_(*this),
      exec_(*this),
      watchers_(*this),
      streams_(*this),
      purger_(*this),
      recovery_(*this),
      account_soon_(broker.reactor()),
      recalc_(broker.reactor()),
      recompute_next_(broker.reactor()) {}

JobManager::~JobManager() = default;

Job* JobManager::find(JobId id) {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
}

void JobManager::remove(JobId id) {
    if (const Job* job = find(id); job && job->array_id)
        if (Job* array = find(job->array_id); array && array->array)
            array->array->elements.erase(job->array_index);
    jobs_.erase(id);
    profiles_.forget(id);
    db_->remove_job(id);
}

void JobManager::respond_once_stored(Message response) {
    db_->after_commit([this, response = std::move(response)]() mutable { broker_.respond(std::move(response)); });
}

void JobManager::post(Job& job, std::string name, nlohmann::json context, double timestamp) {
    JobEvent ev{timestamp > 0 ? timestamp : wall_now(), std::move(name), std::move(context)};
    uint32_t seq = job.next_event_seq;
    db_->add_event(job.id, seq, ev);
    JobState from = job.state;
    apply_event(job, ev);
    streams_.posted(job, seq, ev);
    if (ev.name == "submit")
        counters_.submitted++;
    else if (ev.name == "start")
        counters_.started++;
    if (ev.name == "start") {
        mailer_->job_event(job, kMailBegin);
        dependencies_changed(job);
        // An array has started once one of its elements has (afterstart:ARRAY);
        // afterstart:ARRAY[INDEX] waits under the array's id.
        if (Job* array = job.array_id ? find(job.array_id) : nullptr; array && array->array) {
            if (!array->started)
                post(*array, "start", {{"element", job.id}});
            dependencies_changed(*array);
        }
    }
    if (job.state != from)
        on_state_change(job, from);
}

void JobManager::on_state_change(Job& job, JobState from) {
    if (from == JobState::cleanup && job.state == JobState::priority) {
        exec_.forget(job.id);  // requeued: its run is over; the next is a new launch
        // Its profile is of its latest run: the last one's goes.
        profiles_.forget(job.id);
        db_->remove_profiles(job.id);
        mailer_->job_event(job, kMailRequeue);
    }
    if (job.array_id != 0)
        element_moved(job, from);
    if (job.array && job.state == JobState::cleanup) {
        cancel_elements(job, job.exception_note, 0);
        if (job.state != JobState::cleanup)
            return;  // its last element's end ended it (release), all that follows done there
    }
    if (job.state == JobState::cleanup) {
        if (from == JobState::sched) {
            sched_.withdraw(job.id);
            left_scheduler(job);
        }
        if (from == JobState::run)
            exec_.terminate(job);  // SIGTERM, then SIGKILL (exec.kill-timeout)
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
            return post(job, "priority", {{"priority", priority_of(job)}});
        case JobState::sched:
            return to_scheduler(job);
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
            if (Job* j = find(id); j && j->state == JobState::depend)
                check_dependencies(*j);
        });
        return;
    }
    for (const auto& d : job.dependencies) {
        std::string target = d.index ? format_element(d.target, *d.index) : format_jobid(d.target);
        const Job* t = d.index ? element_of(d.target, *d.index) : find(d.target);
        if (!t && d.index) {
            // An element not made yet: waited for, unless it never will be.
            const Job* array = find(d.target);
            const JobArray* a = array ? array->array.get() : nullptr;
            bool to_make = a && a->will_make(*d.index) && array->state < JobState::run;
            if (to_make)
                return;
            if (a && a->canceled.contains(*d.index))
                return raise(job, "dependency",
                             fmt::format("{}:{} can never be met: it was canceled before it ran", d.scheme, target),
                             0);
        }
        if (!t)
            return raise(job, "dependency", fmt::format("{}:{}: that job is no longer known", d.scheme, target), 0);
        bool ended = t->state == JobState::inactive;
        bool completed = t->result() == "completed";
        bool met = d.scheme == "afterstart" ? t->started
                   : d.scheme == "afterany" ? ended
                   : d.scheme == "afterok"  ? ended && completed
                                            : ended && !completed;
        bool never = !met && ended;
        if (never)
            return raise(job, "dependency",
                         fmt::format("{}:{} can never be met: that job ended {}{}", d.scheme, target, t->result(),
                                     t->started ? "" : " without starting"),
                         0);
        if (!met)
            return;
    }
    if (job.singleton && !singleton_clear(job))
        return;  // looked at again when such a job ends (became_inactive)
    singletons_.erase(job.id);
    post(job, "depend");
}

bool JobManager::singleton_clear(const Job& job) const {
    // Earlier ids only: jobs_ is ordered by id, which is submit order.
    for (auto it = jobs_.begin(); it != jobs_.end() && it->first < job.id; ++it) {
        const Job& other = it->second;
        if (other.state != JobState::inactive && other.userid == job.userid && other.name == job.name)
            return false;
    }
    return true;
}

void JobManager::dependencies_changed(const Job& target) {
    auto [first, last] = dependents_.equal_range(target.id);
    std::vector<JobId> waiting;
    for (auto it = first; it != last; ++it)
        waiting.push_back(it->second);
    if (target.state == JobState::inactive)
        dependents_.erase(first, last);
    for (JobId id : waiting)
        if (Job* j = find(id); j && j->state == JobState::depend && !unstored_.count(id))
            check_dependencies(*j);  // one not yet on disk goes on once it is (on_submit)
}

void JobManager::raise(Job& job, std::string type, std::string note, uint32_t userid) {
    if (job.state == JobState::inactive)
        return;
    post(job, "exception", {{"type", std::move(type)}, {"severity", 0}, {"note", std::move(note)}, {"userid", userid}});
}

std::string JobManager::why_not_requeued(const Job& job) {
    if (job.array)
        return fmt::format("{}: a job array is not requeued itself; requeue its elements ({}[INDEX])",
                           format_jobid(job.id), format_jobid(job.id));
    if (job.state == JobState::run || job.state == JobState::inactive)
        return "";
    if (job.state == JobState::cleanup)
        return fmt::format("{}: job is ending{}; requeue it once it is inactive", format_jobid(job.id),
                           job.requeue_pending ? " (to be requeued already)" : "");
    return fmt::format("{}: job is pending ({}): there is no run to requeue", format_jobid(job.id),
                       state_name(job.state));
}

void JobManager::requeue(Job& job, std::string note, uint32_t userid, std::function<void(const std::string&)> done) {
    if (std::string why = why_not_requeued(job); !why.empty())
        return done ? done(why) : void();
    if (std::string why = why_element_not_requeued(job); !why.empty())
        return done ? done(why) : void();
    // The scheduler's copy of its jobspec again, read off this loop; the
    // event once it is here (the job may have moved on meanwhile).
    // As it was asked: a job that moved on meanwhile (a run ended, was
    // canceled, timed out) is not requeued on that word.
    auto as_asked = [state = job.state, runs = job.requeues, t_run = job.t_run](const Job& j) {
        return j.state == state && j.requeues == runs && j.t_run == t_run;
    };
    db_->read([id = job.id](JobDbReader& reader) { return reader.jobspec(id); },
              [this, id = job.id, note = std::move(note), userid, done, as_asked](const Result<std::string>& text) {
                  auto answer = [&done](const std::string& why) {
                      if (done)
                          done(why);
                  };
                  Job* j = find(id);
                  if (!j)
                      return answer(fmt::format("{}: no such job (purged)", format_jobid(id)));
                  if (std::string why = why_not_requeued(*j); !why.empty())
                      return answer(why);
                  if (std::string why = why_element_not_requeued(*j); !why.empty())
                      return answer(why);  // (its array moved on meanwhile)
                  if (!as_asked(*j))
                      return answer(fmt::format("{}: job changed while asked ({} now); ask again",
                                                format_jobid(id), state_name(j->state)));
                  auto spec = text ? parse_json(*text) : Result<nlohmann::json>(text.error());
                  if (!spec) {
                      log::error("job-manager", "{}: not requeued: its jobspec: {}", format_jobid(id),
                                 spec.error().message);
                      return answer(fmt::format("{}: its stored jobspec cannot be read", format_jobid(id)));
                  }
                  bool was_inactive = j->state == JobState::inactive;
                  j->reread_jobspec(*spec, queues_);
                  if (was_inactive)
                      banks_.submitted(*j);  // active again: counted against its banks' limits
                  post(*j, "requeue", {{"userid", userid}, {"note", note}});
                  // An element that failed runs again: its array counts it by
                  // its next end.
                  if (Job* array = j->array_id ? find(j->array_id) : nullptr;
                      array && array->array && array->array->not_ok.contains(j->array_index))
                      post(*array, "element-requeued", {{"index", j->array_index}, {"id", j->id}});
                  answer("");
              });
}

// An element runs again only within its array: while the array is active,
// and (once ended) within its throttle.
std::string JobManager::why_element_not_requeued(const Job& job) {
    if (job.array_id == 0)
        return "";
    std::string name = format_element(job.array_id, job.array_index);
    const Job* array = find(job.array_id);
    if (!array || !array->array || array->state != JobState::sched)
        return fmt::format("{}: its array has ended; submit it again", name);
    const JobArray& a = *array->array;
    if (job.state == JobState::inactive && a.throttle > 0 && a.active >= a.throttle)
        return fmt::format("{}: its array has {} active elements, its throttle; requeue it once one ends", name,
                           a.active);
    return "";
}

void JobManager::set_urgency(Job& job, int urgency, uint32_t userid) {
    post(job, "urgency", {{"userid", userid}, {"urgency", urgency}});
    if (job.state != JobState::sched)
        return;  // the priority event comes when it gets there
    post(job, "priority", {{"priority", priority_of(job)}});
    if (banks_.is_waiting(job.id)) {
        banks_.unwait(job.id);
        job.limit.clear();
        return to_scheduler(job);  // waits again, in its new place, or goes
    }
    if (!sched_.is_known(job.id))
        return to_scheduler(job);  // it was held
    sched_.reprioritize(job);  // withdrawn there when now held
    if (job.priority == 0)
        left_scheduler(job);
}

void JobManager::allocated(Job& job, nlohmann::json R) {
    post(job, "alloc", {{"R", R}});
    // Nothing starts before the event that allows it is on disk: a crash
    // between the two would run the job again after the restart. The
    // shells get ready meanwhile (exec.run with `hold`), and start their
    // tasks at exec.go: the commit's fsync is off the job's path.
    exec_.launch(job, R);
    db_->after_commit([this, id = job.id, run = job.requeues] {
        if (Job* j = find(id); j && j->requeues == run)  // (not a later run's: requeued meanwhile)
            exec_.alloc_stored(*j);
    });
}

// CLEANUP: once no task runs, resources go back and the job is done.
void JobManager::release(Job& job) {
    if (job.state != JobState::cleanup || exec_.executing(job.id) || (job.array && job.array->active > 0))
        return;
    if (sched_.holds(job.id)) {
        sched_.free(job.id, [this, id = job.id] {
            if (Job* j = find(id); j && j->state == JobState::cleanup) {
                post(*j, "free");
                left_scheduler(*j);
                post(*j, "clean");
            }
        });
        return;
    }
    left_scheduler(job);
    if (!job.ranks.empty() && !job.freed)
        post(job, "free", {{"note", "the scheduler that gave these resources is gone (restart)"}});
    post(job, "clean");
}

void JobManager::became_inactive(Job& job) {
    // Its series goes with its last counters (profiling.md §6).
    if (const auto* live = profiles_.find(job.id)) {
        db_->add_profile(job.id, -1, JobProfiles::series_json(*live).dump());
        profiles_.forget(job.id);
    }
    if (job.array) {  // nothing more is made from them
        std::string().swap(job.array->jobspec);
        std::string().swap(job.array->signature);
    }
    counters_.completed++;
    counters_.by_result[std::string(job.result())]++;
    banks_.ended(job);
    begin_timers_.erase(job.id);
    exec_.forget(job.id);
    mailer_->job_event(job, kMailEnd);
    job.dependencies.clear();
    dependencies_changed(job);
    singletons_.erase(job.id);
    // Singletons of its user and name that were waiting for it.
    std::vector<JobId> waiting;
    for (JobId id : singletons_)
        if (const Job* j = find(id); j && id > job.id && j->userid == job.userid && j->name == job.name)
            waiting.push_back(id);
    for (JobId id : waiting)
        if (Job* j = find(id); j && j->state == JobState::depend && !unstored_.count(id))
            check_dependencies(*j);
    watchers_.inactive(job);  // answered once the clean event is on disk
    // Its record once its end is on disk (the record is made from what the
    // stored eventlog says); those of 100 ms go together (the store commits
    // at most that often anyway): at thousands of jobs a second, one
    // message for hundreds, not for the two or three of one loop turn.
    db_->after_commit([this, id = job.id] {
        to_account_.push_back(id);
        if (!account_soon_.active())
            account_soon_.start(kAccountEvery, [this] { account(std::exchange(to_account_, {}), false); });
    });
}

// accounting.md §2 and §4: made from what the eventlog built; a row of
// the columns in §4's order.
nlohmann::json JobManager::usage_record(const Job& job) {
    double end = job.t_finish > 0 ? job.t_finish : job.t_cleanup > 0 ? job.t_cleanup : job.t_inactive;
    return {job.id,
            job.userid,
            job.bank,
            job.name,
            job.queue,
            job.result(),
            job.status ? nlohmann::json(*job.status) : nlohmann::json(),
            job.exception_type,
            job.t_submit,
            job.t_eligible,
            job.t_run,
            end,
            job.duration,
            job.ranks.size(),
            job.ranks.empty() ? "" : job.nodelist,
            job.alloc_cores,
            job.alloc_gpus,
            job.cpu,
            job.maxrss,
            job.totalrss};
}

void JobManager::account(const std::vector<JobId>& ids, bool replayed) {
    nlohmann::json records = nlohmann::json::array();
    std::vector<JobId> ended;  // and still inactive: one requeued since is recorded at its next end
    for (JobId id : ids)
        if (const Job* job = find(id); job && job->state == JobState::inactive) {
            records.push_back(usage_record(*job));
            ended.push_back(id);
        }
    if (ended.empty())
        return;
    // Purged (memory and jobs.db) only once its record is stored
    // (accounting.md §3). A batch the store refuses (a bug) is logged and
    // its jobs kept, unpurged: their records are sent again at the next
    // start. The answer may come inside this call (a refusal does).
    broker_.rpc(Message::request("accounting.record", {{"records", std::move(records)}}, 0),
                [this, ids = std::move(ended), replayed](const Message& answer) {
                    if (answer.errnum)
                        return log::error("job-manager", "{} usage record{} not stored, jobs kept until a restart: {}",
                                          ids.size(), ids.size() == 1 ? "" : "s", answer.error_text());
                    for (JobId id : ids)
                        if (const Job* job = find(id); job && job->state == JobState::inactive)
                            purger_.add(*job);
                    if (replayed)
                        purger_.sort();
                    purger_.purge_soon();
                });
}

}  // namespace banyan
