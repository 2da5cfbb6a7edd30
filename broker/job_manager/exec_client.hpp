// ExecClient: the job manager's side of the exec services
// (doc/spec/shell.md §7–8). Jobs in RUN: exec.run to every rank of R
// (held until exec.go while alloc is not on disk), `start` once every rank
// reports its tasks running, the time limit and --signal, `banyan job
// kill`. Jobs in CLEANUP: kept until every rank has answered (no task of
// the job is left), then JobTable::release(). A rank lost while its job
// runs is waited for (exec.reattach-timeout: a broker that restarts keeps
// its shells) and asked for its share again when it is back. After a
// restart of rank 0: reattach(), and exec.reconcile for ranks that come
// (back) online.
#pragma once

#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/idset.hpp"
#include "core/jobid.hpp"
#include "core/message.hpp"
#include "core/reactor.hpp"
#include "core/result.hpp"

namespace banyan {

class JobTable;
class JobDbReader;
struct Job;

class ExecClient {
  public:
    explicit ExecClient(JobTable& table);
    // RUN, at the alloc event: exec.run goes out once the jobspec is read
    // (on the reader thread: never inside this call), with `hold` while
    // the event is not on disk yet (shell.md §7). A launch that cannot be
    // made raises an exception on the job inside this call. Once per job.
    void launch(Job& job, const nlohmann::json& R);
    // The alloc event is on disk: exec.go to a held start (or exec.run,
    // when it goes out later, without hold). Rank 0's own exec service
    // answers inside this call. Once per job; nothing for a job not
    // launched.
    void alloc_stored(Job& job);
    // RUN or CLEANUP after a restart of rank 0: its tasks are looked for on
    // every rank of R; a job in RUN waits for ranks not online as for lost
    // ones, one in CLEANUP fails on them (node-failure).
    // `r_text`: its R, as stored (for a share sent again).
    void reattach(Job& job, const IdSet& online, std::string r_text);
    bool executing(JobId id) const { return executing_.count(id) > 0; }
    // RUN: the job's time limit changed (an update): it ends at t_run plus
    // the new limit (now, when that is past), its --signal warning moved.
    void time_limit_changed(Job& job);
    // banyan job kill: now, or once exec.run has gone out.
    void signal(const Job& job, int signo);
    // RUN -> CLEANUP: SIGTERM, then SIGKILL after exec.kill-timeout.
    void terminate(const Job& job);
    // Rank `rank` reported its tasks running (job-manager.started; after a
    // restart it may report again).
    void started(Job& job, uint32_t rank);
    // INACTIVE: nothing held for it.
    void forget(JobId id) { pending_signals_.erase(id); }
    // exec.reconcile to ranks that came (back) online: each keeps only the
    // jobs executing here.
    void reconcile(const IdSet& ranks);
    // Ranks that came (back) online: the jobs waiting for them ask them
    // for their shares again (exec.reattach). After reconcile().
    void ranks_back(const IdSet& ranks);

  private:
    struct Execution {
        size_t ranks_left = 0;      // to answer exec.run (finish)
        size_t ranks_starting = 0;  // to report their tasks started (start)
        IdSet started_ranks;        // ... those that have
        int max_status = 0;
        // What the tasks used (accounting.md §1): CPU seconds of all
        // ranks, the largest resident set on any, their sum.
        double cpu = 0;
        uint64_t maxrss = 0, totalrss = 0;
        bool failed = false;
        bool reattached = false;  // after a restart: `finish` at the time the ranks give
        double last_end = 0;      // ... the latest of them
        std::unique_ptr<Timer> time_limit;
        double end = 0;                  // the time limit, seconds since the epoch; 0: none
        bool sent = false;               // exec.run sent to every rank
        bool stored = false;             // the alloc event is on disk
        bool held = false;               // exec.run went with `hold`; exec.go not sent yet
        std::unique_ptr<Timer> warning;  // --signal: before the time limit, armed once the tasks run
        // Ranks lost while the job runs, each waited for until its timer
        // fires or it has heard the ask (wait_for_rank); those asked now,
        // and those asked since they came back.
        std::unordered_map<uint32_t, std::unique_ptr<Timer>> away;
        IdSet asking, asked_again;
        IdSet gave_up;       // counted as failed without their answer
        std::string r_text;  // R, for a share sent again (launch_again)
    };
    Execution& begin(Job& job, size_t nranks, double end);
    void arm_time_limit(const Job& job, Execution& ex, double end);
    void send_exec_run(JobId id, const std::vector<uint32_t>& ranks, const Result<std::string>& spec);
    static Result<std::string> jobspec_text(JobDbReader& reader, JobId id);
    static std::string exec_run_payload(const Job& job, bool hold, const std::string& r_text, const std::string& spec);
    void launch_again(Job& job, uint32_t rank);
    void send_pending_signals(Job& job);
    void send_go(const Job& job, uint32_t rank);
    // A broker.multicast of `topic` with `payload` (JSON text) to `ranks`,
    // from this rank (overlay.md §10.1); `streaming`: each rank's request
    // is sent STREAMING.
    Message multicast(const std::vector<uint32_t>& ranks, std::string_view topic, const std::string& payload,
                      bool streaming = false);
    void on_multicast_answer(JobId id, std::set<uint32_t>& unanswered, const Message& resp);
    void on_exec_response(JobId id, uint32_t rank, const Message& resp, bool may_wait = true);
    bool wait_for_rank(Job& job, Execution& ex, uint32_t rank, const std::string& why);
    void ask_again(JobId id, uint32_t rank);
    void give_up_on(JobId id, uint32_t rank, const std::string& why);
    void arm_warning(const Job& job, Execution& ex);
    void signal_ranks(const Job& job, int signo);

    JobTable& table_;
    // A nested instance's end for its jobs, a little before the enclosing
    // job's (doc/spec/instances.md §3); 0: none.
    double instance_end_ = 0;
    double lost_wait_ = 300;  // exec.reattach-timeout, seconds
    std::unordered_map<JobId, Execution> executing_;
    std::unordered_map<JobId, std::vector<int>> pending_signals_;  // kill before exec.run went out
};

}  // namespace banyan
