// EndedShares: how each job's share on this rank ended, kept for
// exec.reattach-timeout so that a job manager that started again learns it
// (doc/spec/shell.md §8: the answer to exec.run may have died with rank
// 0), with what rank 0 did not take meanwhile. In memory, and in a file
// that outlives this process (rank 0's own jobs die with it otherwise).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/jobid.hpp"
#include "core/unique_fd.hpp"

namespace banyan {

// A message for the job manager (output, an exception), kept while rank 0
// cannot take it.
struct ForRank0 {
    std::string topic;
    nlohmann::json body;
    bool named = false;  // output: its chunk name is set (ExecService::send_to_job_manager)
};

// What a job's tasks used on one rank (doc/spec/accounting.md §1), as its
// shell reported it at finish.
struct TaskUsage {
    double cpu = 0;       // seconds, user and system
    uint64_t maxrss = 0;  // bytes: the largest resident set of any one process

    nlohmann::json to_json() const { return {{"cpu", cpu}, {"maxrss", maxrss}}; }
};

class EndedShares {
  public:
    struct End {
        JobId id = 0;
        int status = 0;
        double time = 0;       // as the shell reported it
        bool started = false;  // every local task had run
        TaskUsage usage;
        double alloc = 0;  // the run's (LocalJob::alloc)
    };
    // `path`: the file (a line per end, and per share let go);
    // `keep_seconds`: how long each is kept. Reads what a broker that died left there (less what is
    // past keep_seconds) and writes it again.
    EndedShares(std::string path, double keep_seconds);

    void add(End end, std::vector<ForRank0> kept);
    // The latest end of `id` kept, if any.
    std::optional<End> find(JobId id) const;
    // What rank 0 did not take of `id`'s messages, once.
    std::vector<ForRank0> take_kept(JobId id);
    // The tasks of `id`'s share here were let start (exec.run without
    // hold, or exec.go): kept, in the file too, as long as an end, so
    // that a share that left neither an end nor a shell is known never to
    // have run (doc/spec/shell.md §8).
    void let_go(JobId id, double alloc);
    // Whether the tasks of `id`'s run `alloc` (or of a run not named) were
    // let start here.
    bool was_let_go(JobId id, double alloc) const;
    // Since when these records hold every share started here (seconds
    // since the epoch): the file's first line, when a broker of this
    // boot of the machine wrote it and no record failed to be written
    // since; else this object's making.
    double records_since() const { return records_since_; }

  private:
    // Kept last, in the block being filled; its seq.
    uint64_t append(const End& end, double kept_at);
    void expire(double now);
    bool rewrite();  // false (said) when the file could not be replaced
    void line_added();

    std::string path_;
    double keep_seconds_;
    // In the order they were kept, with when, in blocks of kBlock: at
    // thousands of jobs a second these are the rank's longest-lived
    // allocations, and one heap node each (a map's) would pin the heap
    // that a burst of pending jobs grew: rank 0's RSS after 100,000
    // simulated jobs was 110 MB with them, 46 MB kept this way. Looked up by a
    // scan from the newest: only at exec.reattach, for a job that ended
    // lately.
    struct Kept {
        End end;
        double kept_at;  // by when it was kept: the shell's clock may be off
        uint64_t seq;    // counts every end added
    };
    static constexpr size_t kBlock = 1024;
    std::deque<std::vector<Kept>> blocks_;
    size_t front_ = 0;  // of blocks_.front(): the first one not expired
    size_t count_ = 0;
    uint64_t next_seq_ = 0;
    // Rare (rank 0 was away), with the seq of the end they came with.
    std::map<JobId, std::pair<uint64_t, std::vector<ForRank0>>> kept_messages_;
    // Let go: when (this rank's clock) and which, oldest first.
    struct LetGo {
        double at;
        JobId id;
        double alloc;
    };
    std::deque<LetGo> let_go_;
    std::string boot_;  // this boot's id ("" when unknown: nothing is vouched for across brokers)
    double records_since_ = 0;
    UniqueFd file_;
    size_t file_lines_ = 0;
};

}  // namespace banyan
