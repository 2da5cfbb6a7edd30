// JobManager: rank 0's job manager (doc/spec/jobs.md). Takes submissions,
// drives each job through its states by talking to the scheduler
// (sched.*) and the exec service (exec.*), records every change in the job
// database (doc/spec/jobdb.md), and answers listings and watches.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "broker/broker.hpp"
#include "broker/job_manager/job.hpp"
#include "broker/job_manager/job_db.hpp"

namespace banyan {

// What an attach is answered with: the committed events and output from
// where it has read so far.
struct AttachNews {
    std::vector<JobEvent> events;
    std::vector<OutputChunk> output;
};

class JobManager {
  public:
    // Rank 0: opens the database in the state directory and replays it;
    // other ranks: nothing. Error names the database or config key.
    static Result<std::unique_ptr<JobManager>> start(Broker& broker);
    ~JobManager();

  private:
    explicit JobManager(Broker& broker);
    Result<void> restore();
    void resume_after_restart();
    void reconcile_joined_ranks();
    void register_methods();

    // Requests (job_manager_requests.cpp).
    void on_submit(const Message& req);
    void drop_unstored(const std::vector<JobId>& ids, const Error& error);
    void on_list(const Message& req);
    void on_info(const Message& req);
    void on_eventlog(const Message& req);
    void on_attach(const Message& req);
    void on_wait(const Message& req);
    void on_cancel(const Message& req);
    void on_kill(const Message& req);
    void on_urgency(const Message& req);
    void on_output(const Message& req);
    void on_raise(const Message& req);
    void on_started(const Message& req);
    void on_input(const Message& req);
    // An attach waiting for news: what it has seen so far.
    struct Watch {
        Message req;  // without payload
        JobId id;
        uint32_t events_from;
        uint32_t output_from;
        bool reading = false;  // a read for it is under way
        bool stale = false;    // ... and a commit came since it began
    };
    // The job a request ({"id": N, ...}) names, if the caller may see it,
    // with the request's body in `body`; else answers the error itself and
    // returns null.
    Job* visible_job(const Message& req, nlohmann::json& body);
    void read_for_attach(uint64_t watch_id);
    void answer_attach(uint64_t watch_id, const Result<AttachNews>& news);
    void wake_watchers();
    static nlohmann::json wait_answer(const Job& job);

    // The lifecycle (job_manager.cpp).
    // Sends `response` once everything written so far is on disk (an
    // acknowledged change survives a crash of rank 0).
    void respond_once_stored(Message response);
    void post(Job& job, std::string name, nlohmann::json context = nlohmann::json::object());
    void on_state_change(Job& job, JobState from);
    void advance(Job& job);
    void check_dependencies(Job& job);
    void dependencies_changed(const Job& target);
    void raise(Job& job, std::string type, std::string note, uint32_t userid);
    void set_urgency(Job& job, int urgency, uint32_t userid);
    using SchedKey = std::tuple<int64_t, double, JobId>;  // (-priority, t_submit, id): best first
    static SchedKey sched_key(const Job& job);
    void request_alloc(Job& job);
    void fill_window();
    void send_alloc(const Job& job);
    void forget(JobId id);
    void withdraw(JobId id);
    void on_alloc_response(JobId id, uint64_t token, const Message& resp);
    void launch(Job& job, const nlohmann::json& R);
    void send_exec_run(JobId id, const std::vector<uint32_t>& ranks, const std::string& r_text,
                       const Result<std::string>& spec);
    void on_exec_response(JobId id, const Message& resp);
    void signal_ranks(const Job& job, int signo);
    void release(Job& job);
    void became_inactive(Job& job);
    void purge(double now);
    void add_inactive(const Job& job);

    Broker& broker_;
    std::unique_ptr<JobDb> db_;
    JobIdGenerator ids_;
    std::map<JobId, Job> jobs_;
    std::unordered_map<JobId, Message> unstored_;  // submitted, not yet on disk: the submit to answer
    std::multimap<JobId, JobId> dependents_;  // target -> jobs waiting on it
    std::unordered_map<JobId, std::unique_ptr<Timer>> begin_timers_;  // jobs waiting for their --begin-time
    std::unordered_map<JobId, std::vector<int>> pending_signals_;     // kill before exec.run went out
    bool instance_running_ = false;
    IdSet known_online_;  // ranks online at the last subtree change

    // sched.alloc requests in flight: job -> token (a newer request or a
    // cancel makes the answer to an older one stale).
    std::unordered_map<JobId, uint64_t> alloc_pending_;
    uint64_t next_alloc_token_ = 1;
    std::set<SchedKey> to_ask_;  // pending, not held, not yet asked
    std::set<SchedKey> asked_;   // asked: a sched.alloc in flight
    std::unordered_map<JobId, SchedKey> sched_keys_;
    size_t sched_window_ = 4096;
    std::unordered_set<JobId> held_by_sched_;  // R given by this scheduler, not yet freed

    struct Execution {
        size_t ranks_left = 0;      // to answer exec.run (finish)
        size_t ranks_starting = 0;  // to report their tasks started (start)
        int max_status = 0;
        bool failed = false;
        std::unique_ptr<Timer> time_limit;
        double end = 0;                  // the time limit, seconds since the epoch; 0: none
        bool sent = false;               // exec.run sent to every rank
        std::unique_ptr<Timer> warning;  // --signal: before the time limit, armed once the tasks run
    };
    std::unordered_map<JobId, Execution> executing_;

    std::map<uint64_t, Watch> attach_watches_;  // by a number of their own
    uint64_t next_watch_ = 1;
    std::multimap<JobId, Message> wait_watches_;

    // Inactive jobs per user, each by time of becoming inactive. Past the
    // limit the user with the most goes first: one user's flood purges
    // only that user's history.
    std::map<uint32_t, std::deque<std::pair<double, JobId>>> inactive_;
    size_t inactive_count_ = 0;
    double inactive_age_ = 0;
    size_t inactive_limit_ = 0;
    uint64_t output_limit_ = 0;  // bytes of output stored per job
    Timer purge_timer_;
    Timer purge_soon_;
    bool trimmed_ = false;  // memory given back since the queue last drained
};

}  // namespace banyan
