// Job: the job manager's in-memory record of one job, derived from its
// jobspec and eventlog (doc/spec/jobs.md). apply_event() is the one place
// that turns events into state, used both live and when replaying the
// database on start.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/job_manager/job_array.hpp"
#include "broker/job_manager/mailer.hpp"
#include "core/duration.hpp"
#include "core/jobid.hpp"
#include "core/result.hpp"
#include "sched/named_queues.hpp"
#include "sched/priority.hpp"

namespace banyan {

enum class JobState { depend, priority, sched, run, cleanup, inactive };

std::string_view state_name(JobState state);  // "depend", ...
Result<JobState> state_from_name(std::string_view name);

// The last output chunk stored from one exec service (a broker's rank
// and the exec service's incarnation): a chunk at or below it that comes
// again is one sent twice (doc/spec/shell.md §8).
struct OutputSource {
    uint32_t rank = 0;
    uint64_t incarnation = 0;
    uint64_t last = 0;
};

struct JobEvent {
    double timestamp = 0;
    std::string name;
    nlohmann::json context = nlohmann::json::object();

    nlohmann::json to_json() const;
    static Result<JobEvent> from_json(const nlohmann::json& j);
};

struct Dependency {
    std::string scheme;  // afterstart, afterany, afterok, afternotok
    JobId target = 0;
    std::optional<uint32_t> index;  // target[index]: an element of the array `target`
    std::string given;  // the target as the jobspec wrote it (38, f38): errors echo it
};

// attributes.system.reattach-timeout (Job::reattach_timeout): seconds, 0
// or more; none when the key is absent.
Result<std::optional<double>> read_reattach_timeout(const nlohmann::json& system);

constexpr int kDefaultUrgency = 16;
constexpr int kMaxGuestUrgency = 16;
// Levels of brackets a submitted jobspec may nest (its own mapping is one).
// Messages may nest 64 (core/json_parse.hpp), and a jobspec travels inside
// others (exec.run within a broker.multicast: 2 more; job-manager.info's
// answer: 1): the margin lets a job taken at submit launch and be shown.
// Checked at submit only, so a job stored before the bound still runs.
constexpr size_t kMaxJobspecDepth = 48;

struct Job {
    JobId id = 0;
    uint32_t userid = 0;
    double t_submit = 0;
    // The jobspec itself stays in the database (it can be kilobytes).

    // From the jobspec.
    std::string name;
    std::string queue;         // "" without queues
    std::string reservation;   // the advance reservation it runs in, if any
    std::string bank;          // charged to (accounting.md §5); "" without banks
    std::string instance_uri;  // a nested instance's socket (event `instance`); "" when not one
    uint32_t ntasks = 1;
    uint32_t nnodes = 0;  // 0: not asked for; the R decides
    uint32_t nnodes_asked = 0;  // as the jobspec asks, whatever the R (bank limits count it)
    uint64_t ncores = 0;  // cores and GPUs the jobspec asks for in all (a whole node counts as none)
    uint64_t ngpus = 0;
    double duration = 0;  // time limit in seconds; 0: none
    bool duration_updated = false;  // by an `update` event: R's expiration is the old limit's
    std::vector<Dependency> dependencies;
    std::shared_ptr<const MailRequest> mail;  // --mail-type (jobs.md §10); null: none
    bool singleton = false;  // --dependency=singleton: after every earlier job of its user and name has ended
    double begin_time = 0;  // --begin-time: not before (seconds since the epoch); 0: none
    bool requeue_on_node_failure = false;  // --requeue: a lost node sends it back to pending
    // --reattach-timeout: how long a lost rank of the running job is waited
    // for (at most exec.reattach-timeout: the shells wait no longer); unset:
    // that.
    std::optional<double> reattach_timeout;
    // --profile-ebpf: {programs, interval, optional}, as exec.run passes it
    // on (doc/spec/profiling.md §1); null: not profiled.
    std::shared_ptr<const nlohmann::json> ebpf;
    // --signal=SIG@TIME: signum, sent timeleft seconds before the time
    // limit (0: none).
    int warning_signal = 0;
    double warning_timeleft = 0;
    // A job array (doc/spec/arrays.md, attributes.system.array): what it
    // holds beyond a job; null for any other job. Shared only by the copies
    // of a submission not yet stored.
    std::shared_ptr<JobArray> array;
    // An element of an array (its submit event's `array_of`): the array's
    // id, this element's index, and the number of indexes in the array;
    // array_id 0: not an element.
    JobId array_id = 0;
    uint32_t array_index = 0;
    uint64_t array_size = 0;
    // While pending: what the scheduler needs of the jobspec (resources,
    // tasks, duration) as JSON text, so a sched.alloc costs no database
    // read and no environment of kilobytes is parsed again.
    std::string sched_jobspec;

    // From the eventlog.
    JobState state = JobState::depend;
    int urgency = kDefaultUrgency;
    int64_t priority = -1;        // -1: not yet given; recomputed in SCHED (accounting.md §7)
    std::string limit;            // in SCHED: the bank limit it waits under ("limit: ..."); not an event
    std::vector<uint32_t> ranks;  // of R, once allocated (R itself is in the alloc event)
    std::string nodelist;
    bool started = false;
    bool freed = false;
    // A `requeue` event came while it ran: once clean, it is pending again
    // (jobs.md §3). `requeues`: how many times it went back.
    bool requeue_pending = false;
    uint32_t requeues = 0;
    // Preempted (sched.md §9): how its tasks are ended; 0 / below 0: as
    // for any exception (SIGTERM, SIGKILL after exec.kill-timeout).
    int terminate_signal = 0;
    double terminate_grace = -1;
    std::optional<int> status;   // exit code, once finished
    std::string exception_type;  // the first severity-0 exception
    std::string exception_note;
    double t_eligible = 0;  // it could first be scheduled (to SCHED)
    double t_run = 0;
    double t_finish = 0;  // its tasks ended (finish); 0: they never ran, or the finish was lost
    double t_cleanup = 0;
    double t_inactive = 0;
    uint32_t alloc_cores = 0;  // of R
    uint32_t alloc_gpus = 0;
    // What its tasks used, from finish (doc/spec/accounting.md §1): CPU
    // seconds on all nodes, the largest resident set on any, their sum.
    double cpu = 0;
    uint64_t maxrss = 0;
    uint64_t totalrss = 0;
    uint32_t next_event_seq = 0;
    uint32_t next_output_seq = 0;
    // Output stored so far (counted from this start of rank 0), and whether
    // the rest was dropped at job-manager.output-limit.
    uint64_t output_bytes = 0;
    bool output_truncated = false;
    // Where output came from, to drop a chunk sent twice; kept while the
    // job is active (output may come until its shells end).
    std::vector<OutputSource> output_sources;

    // An `update` event's context: name, duration, queue (what is there).
    void apply_update(const nlohmann::json& context);
    // Reads name, task and node counts, duration and dependencies from the
    // jobspec (already valid). Error names a bad dependency.
    // `queues`: the job goes to the queue it asks for or the default, and
    // takes the queue's max-duration when it gives no duration of its own.
    // Error: an unknown queue, or none asked and no default (with queues).
    Result<void> read_jobspec(const nlohmann::json& jobspec, const NamedQueues& queues = {});
    // sched_jobspec again, for a job pending again after a requeue: the
    // jobspec's, with the name, time limit and queue the job has now
    // (updates since its submit kept). A queue gone since: the default's.
    void reread_jobspec(const nlohmann::json& jobspec, const NamedQueues& queues);
    // An element of an array: its jobspec is the array's, whose
    // dependencies, begin time and indexes it does not have of its own.
    void drop_array_parts();
    // Back to pending after a requeue: what its run left is forgotten.
    void requeued();
    // completed, failed, canceled or timeout (inactive jobs); "" otherwise.
    std::string_view result() const;
    // The summary of doc/spec/jobs.md §7.
    nlohmann::json summary() const;
    // The summary as a row (JSON array text) in summary_columns() order,
    // null where a field does not apply; kept until the next event, so
    // listings of thousands of mostly unchanged jobs reuse it. Rows, not
    // objects: a client parses 10,000 of them several times faster.
    const std::string& summary_row() const;
    static const std::vector<std::string>& summary_columns();
    mutable std::string summary_cache;
};

// Applies one event to the job's state (doc/spec/jobs.md §3). Unknown
// events are kept in the eventlog and change nothing.
void apply_event(Job& job, const JobEvent& event);

// The delay from now until `when` (wall seconds) for a Timer: rounded up
// (a timer that fires early finds its moment not yet come), never
// negative, and at most a century, so any time a user can write (@1e300
// among them) is a delay the clock can hold.
std::chrono::milliseconds delay_until(double when);


}  // namespace banyan
