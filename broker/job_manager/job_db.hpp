// JobDb: the job database at rank 0 (doc/spec/jobdb.md): jobspecs,
// eventlogs and output in sqlite3, written by group commit.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "broker/job_manager/job.hpp"
#include "core/reactor.hpp"
#include "core/sqlite.hpp"

namespace banyan {

struct StoredJob {
    JobId id = 0;
    uint32_t userid = 0;
    double t_submit = 0;
    std::string jobspec;
    std::vector<JobEvent> events;
};

struct OutputChunk {
    uint32_t seq = 0;
    uint32_t rank = 0;
    std::string stream;  // stdout or stderr
    std::string data;
};

class JobDb {
  public:
    // Opens (creating) STATEDIR/jobs.db. Error names the file and why.
    static Result<std::unique_ptr<JobDb>> open(Reactor& reactor, const std::string& statedir);
    ~JobDb();

    // Queue writes for the next group commit.
    void add_job(JobId id, uint32_t userid, double t_submit, const std::string& jobspec);
    void add_event(JobId id, uint32_t seq, const JobEvent& event);
    void add_output(JobId id, const OutputChunk& chunk);
    void remove_job(JobId id);
    // Runs `fn` once everything queued so far is committed.
    void after_commit(std::function<void()> fn);
    // Called after every commit (the job manager wakes its watchers).
    void on_commit(std::function<void()> fn) { on_commit_ = std::move(fn); }
    // Commits what is queued now, synchronously (shutdown).
    Result<void> flush();

    // Every job with its eventlog, in id order (for the replay on start).
    Result<std::vector<StoredJob>> load_all();
    // Committed events / output chunks of a job from `seq` on.
    Result<std::vector<JobEvent>> events(JobId id, uint32_t from_seq);
    // Output: from `from_seq` on, as many chunks as make `max_bytes` (at
    // least one).
    Result<std::vector<OutputChunk>> output(JobId id, uint32_t from_seq, size_t max_bytes = SIZE_MAX);
    Result<std::string> jobspec(JobId id);
    Result<JobId> max_id();

    size_t commits() const { return commits_; }

  private:
    JobDb(Reactor& reactor, Database db) : reactor_(reactor), db_(std::move(db)), timer_(reactor) {}
    using Write = std::function<Result<void>(Database&)>;
    void queue(Write write);
    void commit_now();

    Reactor& reactor_;
    Database db_;
    Timer timer_;
    std::vector<Write> writes_;
    std::vector<std::function<void()>> waiters_;
    std::function<void()> on_commit_;
    size_t commits_ = 0;
    Clock::time_point last_commit_{};
    JobId last_id_ = 0;         // the largest id added
    JobId last_id_stored_ = 0;  // ... and committed
};

}  // namespace banyan
