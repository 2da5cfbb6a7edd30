// The exec service's own: what it holds for each job on this rank, and
// what its parts (exec_service.cpp: requests and the job's life;
// exec_shell.cpp: starting and hearing the shell; exec_perilog.cpp: prolog
// and epilog; exec_io.cpp: stdin, proxy and fence for a running job;
// exec_recovery.cpp: re-attach, reconcile and cut-off) share. Not for any
// other service: they reach it through its messages (doc/spec/shell.md §7).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/exec/exec_service.hpp"
#include "broker/exec/job_cgroup.hpp"
#include "core/kept_output.hpp"
#include "core/line_channel.hpp"
#include "core/reactor.hpp"

namespace banyan {

// After SIGKILL went to the tasks, how long the shell has to report before
// it and its cgroup are killed too.
inline constexpr auto kShellGrace = std::chrono::seconds(2);
// Output sent to rank 0 and not yet answered beyond which the shell's
// pipe is no longer read (it resumes at half): bounds what a fast writer
// queues in the brokers.
inline constexpr size_t kOutputInFlightLimit = size_t{4} << 20;
// The most tasks a shell may name to the profiler (profiling.md §5).
inline constexpr size_t kMaxTasksNamed = 16384;

struct ExecService::LocalJob {
    // exec.run or exec.reattach, answered when the shell has finished;
    // none for an adopted shell until a job manager asks (the result is
    // kept in ended_ all the same).
    std::optional<Message> answer_to;
    // answer_to is a multicast's exec.run (overlay.md §10.1): it takes
    // answers before its last (started), and relays wait for its last.
    bool answers_a_stream() const {
        return answer_to && answer_to->topic == "exec.run" && answer_to->has_flag(msgflag::streaming);
    }
    pid_t adopted_pid = 0;  // a dead broker's shell, reached through its socket
    // Where the job is in its life on this rank (doc/spec/shell.md §7).
    enum class Phase {
        held,      // exec.run with `hold`: waits for exec.go (its alloc is not on disk yet)
        starting,  // the prolog runs, or the shell starts the tasks
        running,   // every local task runs
        ending,    // the shell finished or is gone: the epilog, then the answer
    };
    Phase phase = Phase::starting;
    // Its end is answered (finish, fail): only its removal, posted to the
    // loop, is left. A run of the same job that comes meanwhile (requeued
    // at once) takes its place.
    bool over = false;
    bool tasks_ran = false;  // it was running: said with its end
    // What rank 0 did not take (no route to it), and all after it, in
    // order: sent again at exec.reattach.
    std::vector<ForRank0> kept;
    KeptOutput kept_output;       // how much of `kept` may be output
    bool told_long_line = false;  // the job heard once that its shell sent a line too long
    uint32_t leader = 0;          // the first rank of R: where fences meet
    uint32_t nshells = 1;
    std::set<uint64_t> fences_asked;  // sent to the leader, not yet handed to the shell
    std::unique_ptr<Subprocess> shell;
    std::unique_ptr<LineChannel> channel;
    std::optional<JobCgroup> cgroup;
    // Memory (doc/spec/shell.md §1): the bytes R gives the job on this
    // rank (0: not limited); the v1 memory cgroup that limits it where the
    // job's own cgroup cannot (the shell joins it before it executes);
    // whether a limit is in place.
    uint64_t memory_limit = 0;
    std::optional<JobCgroup> memory_cgroup;
    bool memory_limited = false;
    std::optional<int> status;    // from the shell's finish
    TaskUsage usage;              // ... and what the tasks used
    double end_time = 0;          // when its tasks ended
    size_t output_in_flight = 0;  // bytes sent to job-manager.output, not yet answered
    std::unique_ptr<Timer> simulated;
    std::unique_ptr<Timer> escalate;       // terminate: SIGKILL, then the shell itself
    uint32_t userid = 0;                   // the job's owner
    std::string credential;                // the owner's MUNGE credential (J), for banyan-imp
    std::string tmpdir;                    // <rundir>/jobs/<id>, removed with the job
    std::vector<std::string> perilog_env;  // BANYAN_JOB_*, BANYAN_R: for the prolog and epilog
    std::unique_ptr<Subprocess> perilog;
    std::unique_ptr<Timer> perilog_timer;
    bool perilog_timed_out = false;
    std::optional<int> killed_before_start;  // a signal that came during the prolog
    // Held, the shell has its job and is ready. What it would be sent
    // meanwhile, or during the prolog, waits here, in order.
    std::function<void()> on_go;          // what exec.go starts besides (a prolog, a simulated run)
    std::vector<std::string> held_lines;  // JSON, one line each
    // exec.proxy requests the shell has not answered yet, by tag.
    std::map<uint64_t, Message> proxied;
    uint64_t next_proxy_tag = 1;
    // Which start of this job id on this rank: a late answer or exit of an
    // earlier one's shell (a start ended, then run again after rank 0
    // restarted) is told apart by it.
    uint64_t launch = 0;
    // Which run of the job: its alloc event's time by rank 0's clock (0:
    // not given). A share of an alloc that never reached rank 0's disk,
    // met by a later run's exec.run or exec.reattach, is told apart by it.
    double alloc = 0;
    bool let_go = false;  // its tasks may start: said in ended_ (release_lines)
    // --profile-ebpf (exec_profile.cpp): asked; counted by the profiler
    // (from its `track` answer until `untrack`); sampled every interval.
    std::optional<EbpfRequest> ebpf;
    bool ebpf_tracked = false;
    bool ebpf_tasks_named = false;  // the shell said which task is which (once)
    std::chrono::steady_clock::time_point ebpf_next_sample{};
    std::unique_ptr<Timer> ebpf_timer;  // track's patience, then untrack's
};

struct ExecService::Fence {
    nlohmann::json data = nlohmann::json::object();  // rank -> base64
    struct Part {
        Message request;  // answered at the end
        uint32_t rank;
        bool by_multicast;  // it takes the result by exec.fence-data
    };
    std::vector<Part> waiting;
    size_t bytes = 0;     // of data, all shells together
    bool failed = false;  // over kFenceDataLimit: every part answered with the error
    uint32_t failed_parts = 0;
};

inline std::string describe_wait_status(int wait_status) {
    if (WIFSIGNALED(wait_status))
        return fmt::format("was killed by signal {} ({})", WTERMSIG(wait_status), strsignal(WTERMSIG(wait_status)));
    return fmt::format("exited with status {} before it reported", exit_code_from_wait_status(wait_status));
}

}  // namespace banyan
