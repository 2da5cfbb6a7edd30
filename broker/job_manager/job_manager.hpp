// JobManager: rank 0's job manager (doc/spec/jobs.md). Takes submissions,
// drives each job through its states, records every change in the job
// database (doc/spec/jobdb.md), and answers requests. One part per
// concern, as flux-core's job-manager has one file per concern:
//   job_manager.cpp           the lifecycle: events, states, dependencies
//   job_manager_requests.cpp  the job-manager.* requests (it lists which of
//                             job_manager_{submit,queries,control,running}.cpp
//                             serves each)
//   job_manager_banks.cpp     banks, their limits, and priority (accounting.md §5-8)
//   job_manager_arrays.cpp    job arrays and their elements (arrays.md)
// The parts below see the jobs through JobTable (job_table.hpp):
//   sched_client              SCHED, and the R that RUN/CLEANUP jobs hold
//   exec_client               RUN and CLEANUP: tasks on the ranks of R
//   watchers                  attach and wait requests (any state)
//   event_streams             job-manager.events: every committed event
//   purge                     INACTIVE jobs: kept, then removed
//   recovery                  start on a database: replay, re-attach (a friend:
//                             it rebuilds all of this state)
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "broker/broker.hpp"
#include "broker/job_manager/bank_book.hpp"
#include "broker/job_manager/event_streams.hpp"
#include "broker/job_manager/exec_client.hpp"
#include "broker/job_manager/job.hpp"
#include "broker/job_manager/job_db.hpp"
#include "broker/job_manager/job_profiles.hpp"
#include "broker/job_manager/job_table.hpp"
#include "broker/job_manager/purge.hpp"
#include "broker/job_manager/recovery.hpp"
#include "broker/job_manager/sched_client.hpp"
#include "broker/job_manager/watchers.hpp"
#include "broker/queue_states.hpp"

namespace banyan {

// The instance owner asked (role::owner): may act on every job.
inline bool is_owner(const Message& req) { return req.rolemask & role::owner; }

class SignatureCheck;

// From the [job-manager] table (doc/man/banyan-broker.md).
struct JobManagerLimits {
    double inactive_age = 7 * 86400;   // seconds an inactive job is kept
    size_t inactive_limit = 10000;     // inactive jobs kept at most
    uint64_t output_limit = 16 << 20;  // bytes of output stored per job
    size_t sched_window = 4096;        // pending jobs asked of the scheduler at once
    size_t max_active_per_user = 0;    // jobs not yet inactive, per user other than the owner; 0: no limit
    size_t max_pending_per_user = 0;   // jobs not yet running, likewise
    ArrayLimits arrays;                // job-manager.max-array-size, max-array-index
    // exec.imp is set: jobs run as their users, so a user's jobspec must
    // come signed (MUNGE) for banyan-imp to start it.
    bool signed_jobs = false;
};

class JobManager final : private JobTable {
  public:
    // Rank 0: opens the database in the state directory and replays it;
    // other ranks: nothing. Error names the database or config key.
    static Result<std::unique_ptr<JobManager>> start(Broker& broker);
    ~JobManager();

  private:
    // The parts see the jobs through JobTable; recovery, which rebuilds
    // this state at start (the replay, the id generator, dependencies,
    // re-attach), reaches all of it.
    friend class Recovery;

    // JobTable (job_table.hpp).
    Broker& broker() override { return broker_; }
    JobDb& db() override { return *db_; }
    const JobManagerLimits& limits() const override { return limits_; }
    bool instance_running() const override { return instance_running_; }
    size_t size() const override { return jobs_.size(); }
    void remove(JobId id) override;

    JobManager(Broker& broker, const JobManagerLimits& limits, std::unique_ptr<JobDb> db);
    void register_methods();

    // Requests (job_manager_requests.cpp lists which file serves each).
    void on_submit(const Message& req);
    // eBPF profiles (job_manager_running.cpp, queries): a rank's counters;
    // a job's profile.
    void on_profile(const Message& req);
    void on_profile_get(const Message& req);
    // The submission, its signature checked (or none needed).
    void submit(const Message& req, nlohmann::json body);
    // Every check of the job manager's own passed: could it ever run here
    // (sched.feasibility)? Then stored.
    // `text`: the jobspec as stored (stored_text).
    void check_feasibility(const Message& req, nlohmann::json body, std::string text, Job job,
                           const std::string& signature);
    void store_submission(const Message& req, std::string text, Job job, const std::string& signature);
    void answered_barrier(const Message& req, const std::function<void()>& fn);
    void drop_unstored(const std::vector<JobId>& ids, const Error& error);
    void on_list(const Message& req);
    void on_info(const Message& req);
    void on_instance(const Message& req);
    void on_proxy(const Message& req);
    void on_eventlog(const Message& req);
    void on_attach(const Message& req);
    void on_wait(const Message& req);
    void on_wait_all(const Message& req);
    void on_cancel(const Message& req);
    void on_kill(const Message& req);
    void on_kill_all(const Message& req);
    void on_urgency(const Message& req);
    void on_update(const Message& req);
    void on_requeue(const Message& req);
    void on_preempt(const Message& req);
    void commit_update(const Message& req, JobId id, const nlohmann::json& update, std::optional<int> urgency);
    void on_output(const Message& req);
    void on_raise(const Message& req);
    void on_started(const Message& req);
    void on_input(const Message& req);
    void on_stats(const Message& req);
    void on_banks(const Message& req);
    void on_priority(const Message& req);
    // The job a request ({"id": N, ...}) names, if the caller may see it,
    // with the request's body in `body`; else answers the error itself and
    // returns null. {"id": A, "index": I} names element I of array A; one
    // not made yet is an error, unless `unmade` is given: then the array,
    // with I in *unmade.
    Job* visible_job(const Message& req, nlohmann::json& body, std::optional<uint32_t>* unmade = nullptr);

    // The lifecycle (job_manager.cpp).
    Job* find(JobId id) override;
    // Sends `response` once everything written so far is on disk (an
    // acknowledged change survives a crash of rank 0).
    void respond_once_stored(Message response) override;
    // Records an event at `timestamp` (0: now) and takes the steps its
    // state change allows.
    void post(Job& job, std::string name, nlohmann::json context = nlohmann::json::object(),
              double timestamp = 0) override;
    void on_state_change(Job& job, JobState from);
    void advance(Job& job);
    void check_dependencies(Job& job);
    void dependencies_changed(const Job& target);
    void raise(Job& job, std::string type, std::string note, uint32_t userid) override;
    void requeue(Job& job, std::string note, uint32_t userid,
                 std::function<void(const std::string&)> done) override;
    // Why `job` cannot be requeued now ("" when it can).
    static std::string why_not_requeued(const Job& job);
    std::string why_element_not_requeued(const Job& job);
    std::string over_user_limits(const Message& req) const;
    void set_urgency(Job& job, int urgency, uint32_t userid);
    void allocated(Job& job, nlohmann::json R) override;

    // Job arrays (job_manager_arrays.cpp). An array in SCHED makes its
    // next elements while its throttle and the scheduler's window allow
    // (to_scheduler, and as its elements move on), and ends once none is
    // left to make and none is active.
    void make_elements(Job& array);
    void make_element(Job& array, uint32_t index);
    void element_moved(Job& element, JobState from);
    void end_array_if_done(Job& array);
    void cancel_elements(const Job& array, const std::string& note, uint32_t userid);
    // The made element `index` of `array` (a scan of the jobs after it), or null.
    Job* element_of(JobId array, uint32_t index);
    void cancel_unmade(const Message& req, Job& array, uint32_t index);

    // Banks, limits and priority (job_manager_banks.cpp).
    // The table as the accounting service has it now (at start).
    Result<void> load_banks();
    // The priority of a job from its factors now (accounting.md §7).
    int64_t priority_of(const Job& job, PriorityFactors* factors = nullptr) const;
    // A job in SCHED: asked of the scheduler, or waiting under a limit.
    void to_scheduler(Job& job);
    // A job no longer asked or holding resources: its limits free, and
    // the jobs waiting under limits looked at again.
    void left_scheduler(Job& job);
    // The jobs waiting under limits, looked at again best first: all, or
    // those of one top bank's tree.
    void retry_waiting(const std::optional<std::string>& top = std::nullopt);
    // Every pending job's priority again (new fair-share, or age): a
    // slice of the jobs each loop turn, so that 100,000 of them never
    // hold the loop for long; asked again meanwhile, it starts over.
    void recompute_priorities();
    void recompute_slice();
    void release(Job& job) override;
    void became_inactive(Job& job);
    // Sends the usage records of inactive jobs `ids` to the accounting
    // service; each is purgeable once its record is stored (the answer
    // may come inside this call). `replayed`: the jobs of a restart, not
    // in the order they ended.
    void account(const std::vector<JobId>& ids, bool replayed);
    static nlohmann::json usage_record(const Job& job);

    Broker& broker_;
    std::unique_ptr<JobDb> db_;
    std::unique_ptr<SignatureCheck> signature_check_;  // made at the first signed submission
    JobManagerLimits limits_;
    // [queues.NAME] (sched/named_queues.hpp); each may be disabled, with a
    // reason (job-manager.queue-enable / queue-disable; kept in
    // STATEDIR/queues.db: QueueStates).
    NamedQueues queues_;
    std::map<std::string, std::string> disabled_;  // queue -> reason
    std::unique_ptr<QueueStates> queue_states_;
    // Why a job may not go to `queue`: disabled, or over one of its limits.
    std::string over_queue_limits(const NamedQueue& queue, const Job& job, uint32_t userid) const;
    // ... of which the time limit alone ("" when `duration` is within it).
    static std::string over_max_duration(const NamedQueue& queue, double duration);
    void on_queue_list(const Message& req);
    void on_queue_enable(const Message& req);
    JobIdGenerator ids_;
    std::map<JobId, Job> jobs_;
    ProfilingPolicy profiling_;  // [profiling] (doc/spec/profiling.md §1)
    JobProfiles profiles_;       // of running profiled jobs
    std::unordered_map<JobId, Message> unstored_;  // submitted, not yet on disk: the submit to answer
    std::multimap<JobId, JobId> dependents_;  // target -> jobs waiting on it
    std::unique_ptr<Mailer> mailer_;
    std::set<JobId> singletons_;              // jobs in DEPEND with --dependency=singleton
    // A job that waits for no earlier job of its user and name to be active.
    bool singleton_clear(const Job& job) const;
    std::unordered_map<JobId, std::unique_ptr<Timer>> begin_timers_;  // jobs waiting for their --begin-time
    bool instance_running_ = false;

    SchedClient sched_;
    ExecClient exec_;
    Watchers watchers_;
    EventStreams streams_;
    // Since this start of rank 0, for job-manager.stats (http.md §5).
    struct Counters {
        uint64_t submitted = 0, started = 0, completed = 0;
        std::map<std::string, uint64_t, std::less<>> by_result;
    } counters_;
    Purger purger_;
    Recovery recovery_;
    std::vector<JobId> to_account_;  // inactive, their records not yet sent
    Timer account_soon_;
    BankBook banks_;
    PrioritySettings priority_;
    int64_t top_queue_priority_ = 0;  // the highest queue priority (the queue factor's scale)
    Timer recalc_;
    Timer recompute_next_;
    JobId recompute_from_ = 0;
};

}  // namespace banyan
