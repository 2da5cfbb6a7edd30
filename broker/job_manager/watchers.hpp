// Watchers: requests that wait for news of a job, in any state.
// job-manager.attach is answered with the committed events and output
// past what the caller has seen, as soon as there are any (read on the
// database's reader thread after each commit that brought the job news);
// job-manager.wait is answered once the job is INACTIVE and on disk, and
// job-manager.wait-all streams that answer for each job of its list.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/job_manager/job.hpp"
#include "broker/job_manager/job_db.hpp"
#include "core/message.hpp"

namespace banyan {

class JobTable;

// What an attach is answered with: the committed events and output from
// where it has read so far.
struct AttachNews {
    std::vector<JobEvent> events;
    std::vector<OutputChunk> output;
};

class Watchers {
  public:
    explicit Watchers(JobTable& table) : table_(table) {}
    void attach(const Message& req, JobId id, uint32_t events_from, uint32_t output_from);
    // Answered once the job is inactive and that is on disk: at once (next
    // loop turn) if it is so already.
    void wait(const Message& req, const Job& job);
    // job-manager.wait-all: answers {jobs: N} before it returns (and, for
    // none, ENODATA), then each of `ids` (the caller's active jobs,
    // ascending) once it is inactive and on disk, then ENODATA. The
    // caller's oldest stream is ended (EOVERFLOW) when it has
    // kWaitAllsPerUser already; nothing else ends one (no timeout, no
    // news of a client gone).
    void wait_all(const Message& req, std::vector<JobId> ids);
    // After every commit.
    void committed();
    // Its waits are answered once this is on disk.
    void inactive(const Job& job);

  private:
    // An attach waiting for news: what it has seen so far.
    struct Watch {
        Message req;  // without payload
        JobId id;
        uint32_t events_from;
        uint32_t output_from;
        bool reading = false;  // a read for it is under way
        bool stale = false;    // ... and a commit came since it began
    };
    void read_for_attach(uint64_t watch_id);
    void answer_attach(uint64_t watch_id, const Result<AttachNews>& news);
    static nlohmann::json wait_answer(const Job& job);
    // A caller may hold this many wait-all streams at once: each holds its
    // list until its last job ends, whether or not the caller is there.
    // wait_alls_ is scanned at each job's end: a few streams a user.
    static constexpr size_t kWaitAllsPerUser = 16;
    struct WaitAll {
        Message req;             // without payload
        std::vector<JobId> ids;  // ascending
        std::vector<bool> answered;  // by position in ids: each job is answered once, at its first end
        size_t unanswered;
    };

    JobTable& table_;
    std::map<uint64_t, Watch> attaches_;  // by a number of their own
    uint64_t next_watch_ = 1;
    std::multimap<JobId, Message> waits_;
    std::map<uint64_t, WaitAll> wait_alls_;  // by a number of their own
};

}  // namespace banyan
