// JobDb: the job database at rank 0 (doc/spec/jobdb.md): jobspecs,
// eventlogs and output in sqlite3, written by group commit. The loop never
// touches the disk: commits run on a writer thread, reads on a reader
// thread (each a DbWorker with its own connection), and their results come
// back as callbacks on the loop.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/job_manager/job.hpp"
#include "core/db_worker.hpp"
#include "core/histogram.hpp"
#include "core/reactor.hpp"

namespace banyan {

struct StoredJob {
    JobId id = 0;
    uint32_t userid = 0;
    double t_submit = 0;
    std::string jobspec;
    std::vector<JobEvent> events;
    uint32_t next_output_seq = 0;  // output chunks stored: the next one's seq
    uint64_t output_bytes = 0;
    std::vector<OutputSource> output_sources;
};

struct OutputChunk {
    uint32_t seq = 0;
    uint32_t rank = 0;
    std::string stream;  // stdout or stderr
    std::string data;
};

// Reads of committed data, on the reader thread (JobDb::read).
class JobDbReader {
  public:
    explicit JobDbReader(Database& db) : db_(db) {}
    // Every job with its eventlog, in id order (for the replay on start).
    Result<std::vector<StoredJob>> load_all();
    // Committed events of a job from `seq` on.
    Result<std::vector<JobEvent>> events(JobId id, uint32_t from_seq);
    // Output: from `from_seq` on, as many chunks as make `max_bytes` (at
    // least one).
    Result<std::vector<OutputChunk>> output(JobId id, uint32_t from_seq, size_t max_bytes = SIZE_MAX);
    // ENOENT when the job is not stored (never, or purged).
    Result<std::string> jobspec(JobId id);
    // The job's MUNGE credential; empty when it was submitted unsigned.
    Result<std::string> signature(JobId id);
    // The job's stored eBPF profile (doc/spec/profiling.md §6): each rank's
    // last counters, and its series as rank -1.
    Result<std::vector<std::pair<int64_t, std::string>>> profiles(JobId id);
    // The largest id ever issued (0 for a new database).
    Result<JobId> max_id();

  private:
    Database& db_;
};

class JobDb {
  public:
    // Opens (creating) STATEDIR/jobs.db. Error names the file and why.
    static Result<std::unique_ptr<JobDb>> open(Reactor& reactor, const std::string& statedir);
    // Commits what is queued (waiting for it), then stops both threads.
    ~JobDb();

    // Queue writes for the next group commit.
    // `signature`: the submitter's MUNGE credential over the jobspec
    // (empty: unsigned), stored in the same transaction.
    void add_job(JobId id, uint32_t userid, double t_submit, const std::string& jobspec,
                 const std::string& signature = "");
    void add_event(JobId id, uint32_t seq, const JobEvent& event);
    void add_output(JobId id, const OutputChunk& chunk);
    void set_output_source(JobId id, const OutputSource& source);  // replaces that source's last
    void add_profile(JobId id, int64_t rank, std::string data);  // replaces that rank's
    void remove_profiles(JobId id);                              // a requeued job's last run's
    void remove_job(JobId id);
    // Runs `fn` on the loop once everything queued so far is committed
    // (never inside this call). A failed commit is retried every 100 ms
    // until it lands: `fn` waits.
    void after_commit(std::function<void()> fn);
    // Called on the loop after every commit (the job manager wakes its
    // watchers).
    void on_commit(std::function<void()> fn) { on_commit_ = std::move(fn); }
    // A failed commit drops the jobs it would have created (add_job), with
    // every write of theirs, and calls `fn` with their ids and the error:
    // their submissions are refused, not kept waiting for the disk. The
    // rest of the batch is retried.
    void on_dropped(std::function<void(const std::vector<JobId>&, const Error&)> fn) { on_dropped_ = std::move(fn); }
    // The last commit's error while commits fail (a full disk), else none.
    const std::optional<Error>& failing() const { return failing_; }

    // Runs work(JobDbReader&) on the reader thread, then done(result) on
    // the loop. It sees every commit whose after_commit callbacks have run.
    template <typename Work, typename Done>
    void read(Work work, Done done) {
        reader_->run(
            [work = std::move(work)](Database& db) mutable {
                JobDbReader reader(db);
                return work(reader);
            },
            std::move(done));
    }
    // The same, waiting for the result: for the replay on start only.
    template <typename Work>
    auto read_now(Work work) {
        return reader_->run_and_wait([work = std::move(work)](Database& db) mutable {
            JobDbReader reader(db);
            return work(reader);
        });
    }

    size_t commits() const { return commits_; }
    // Each batch, from its first write to its commit on disk.
    const Histogram& commit_latency() const { return commit_latency_; }

  private:
    struct Write {
        JobId job = 0;
        bool creates = false;  // add_job: the write that makes the job
        std::function<Result<void>(Database&)> apply;
    };
    struct Batch {
        std::vector<Write> writes;
        std::vector<std::function<void()>> waiters;
        JobId last_id = 0;  // recorded in meta with the batch (0: unchanged)
        // Set by the writer thread; read on the loop only after waiting
        // for a later task of that thread (~JobDb).
        bool committed = false;
        Clock::time_point first_write{};  // for commit_latency()
    };
    JobDb(Reactor& reactor, Database writer, Database reader);
    void queue(Write write);
    void commit_next();
    void on_committed(std::shared_ptr<Batch> batch, const Result<void>& r);
    void on_commit_failed(Batch& batch, const Error& error);

    Reactor& reactor_;
    std::unique_ptr<DbWorker> writer_;
    std::unique_ptr<DbWorker> reader_;
    Batch queued_;                       // not yet handed to the writer
    std::shared_ptr<Batch> committing_;  // handed to the writer, not yet done
    Timer commit_soon_;                  // writes of one loop turn go together
    Timer retry_;
    std::function<void()> on_commit_;
    std::function<void(const std::vector<JobId>&, const Error&)> on_dropped_;
    std::optional<Error> failing_;
    Histogram commit_latency_;
    Clock::time_point failing_since_{}, failure_logged_{};
    size_t commits_ = 0;
    JobId last_id_ = 0;         // the largest id added
    JobId last_id_stored_ = 0;  // ... and committed
};

}  // namespace banyan
