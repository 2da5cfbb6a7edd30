// ExecService: runs a job's share of tasks on this rank by starting one
// banyan-shell for it (doc/spec/shell.md): exec.run starts the shell and is
// answered with its status once it has finished and nothing of the job is
// left (with `hold`, the shell waits for its job until exec.go: §7);
// exec.kill / exec.terminate / exec.stdin pass signals and input on;
// exec.fence joins the shells' PMIx fences at the job's first rank, which
// multicasts the result to them (exec.fence-data). The
// shell's output and exceptions go to the job manager at rank 0. A jobspec
// with attributes.system.exec.test.run_duration is simulated: nothing is
// started. Jobs outlive a crash of this broker or of rank 0
// (doc/spec/shell.md §8): a starting exec service adopts the shells a dead
// one left in its run directory, keeps output rank 0 could not take and
// the result of every job that ended, and exec.reattach hands both to a
// job manager that started again.
//
// Its code, by concern (local_job.hpp: what it holds per job):
//   exec_service.cpp   start (config), exec.run, exec.go (held starts),
//                      exec.kill, exec.terminate; the outbox to rank 0;
//                      a job's end on this rank (finish, cgroup removal)
//   exec_shell.cpp     starting the shell and reading it (RUN: output,
//                      exceptions, started, finish)
//   exec_perilog.cpp   prolog and epilog (before the start, after the end)
//   exec_io.cpp        exec.stdin, exec.proxy, exec.fence, exec.fence-data
//                      (a running job)
//   exec_recovery.cpp  adopted shells, exec.reattach, exec.reconcile,
//                      exec.cut-off (failures: shell.md §8)
#pragma once

#include <deque>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "broker/broker.hpp"
#include "broker/exec/ended_shares.hpp"
#include "broker/exec/job_cgroup.hpp"
#include "broker/exec/profiler_link.hpp"
#include "broker/exec/shell_fork_server.hpp"
#include "core/jobid.hpp"
#include "core/unique_fd.hpp"

namespace banyan {

// What exec.run asks of the eBPF profiles (doc/spec/profiling.md §1).
struct EbpfRequest {
    std::vector<std::string> programs;
    double interval = 10;  // seconds between samples
    bool optional = false;
};

class ExecService {
  public:
    // Error: a bad exec.kill-timeout.
    static Result<std::unique_ptr<ExecService>> start(Broker& broker);
    ~ExecService();

  private:
    void leave_shells_running();
    struct LocalJob;
    struct Fence;

    explicit ExecService(Broker& broker);
    void on_run(const Message& req);
    void on_go(const Message& req);
    // Ends a job's hold (exec.go, or a re-attach): its shell gets its lines.
    void go(JobId id, LocalJob& job);
    static bool is_phantom(const LocalJob& job, double alloc);
    // Ends a phantom start with no task run, logging `how` ("ended", ...).
    void end_phantom(JobId id, std::string_view how);
    void to_shell(LocalJob& job, const nlohmann::json& message);
    // The same, written already as one line of JSON.
    void to_shell_line(LocalJob& job, std::string line);
    void send_held_lines(LocalJob& job);
    void release_lines(JobId id, LocalJob& job);
    void end_held(JobId id, int signo);
    // Makes the job's run directory, cgroup and pipes and starts its shell
    // (launch_shell). Error: nothing was started; once it returns, a
    // failure to start the shell ends the job.
    Result<void> start_shell(JobId id, LocalJob& job, nlohmann::json request, const std::string& jobspec);
    // The shell's ends of its pipes (and banyan-imp's request), kept until
    // it has started.
    struct ShellEnds {
        UniqueFd stdin_fd, stdout_fd, imp_request;
    };
    void launch_shell(JobId id, std::shared_ptr<ShellEnds> ends);
    // Sets the job's memory limit on this rank (job.memory_limit), in its
    // cgroup or a v1 memory one; where it cannot, the job is told.
    std::string cgroup_name(JobId id, const LocalJob& job) const;
    void limit_memory(JobId id, LocalJob& job);
    void tell_memory_not_limited(JobId id, LocalJob& job, const std::string& why);
    // An OOM kill among the job's processes here becomes its `oom`
    // exception (doc/spec/jobs.md §5).
    void report_oom_kills(JobId id, LocalJob& job);
    // `retryable`: nothing was started on the pipes (they may be used again).
    using ShellStarted = std::function<void(Result<std::unique_ptr<Subprocess>> shell, bool retryable)>;
    // The shell as `options` says: forked by the fork server where it can
    // be (doc/spec/shell.md §1.1), else executed. `started` gets it (or
    // why not): inside this call for an executed shell, on the loop when
    // the server answers for a forked one. `launch`: the job's
    // (LocalJob::launch), for its shell's exit.
    void spawn_shell(JobId id, uint64_t launch, const SpawnOptions& options, ShellStarted started);
    // Connects to the shells a dead broker left in the run directory.
    void adopt_orphaned_shells();
    void on_shell_message(JobId id, Result<nlohmann::json> message);
    // Sends in order: kept, with everything after it, while rank 0 is away.
    void send_to_job_manager(JobId id, LocalJob& job, ForRank0 message);
    void keep(LocalJob& job, ForRank0 message);
    void name_chunk(ForRank0& message);  // output: [rank, incarnation, n], n new
    // Connects to <rundir>/jobs/<id>/reattach.sock; false when there is none.
    bool adopt_shell(const std::string& path, JobId id);
    // Takes the cgroups the shell `pid` of job `id` runs in, as an earlier
    // broker of this rank made them, with their memory limit.
    void adopt_cgroups(JobId id, LocalJob& job, pid_t pid);
    void report_started(JobId id);
    void on_shell_exit(JobId id, uint64_t launch, int wait_status);
    // The shell reported finish, or is gone (`wait_status`, when it was
    // this broker's child and did not report): what is left of the job is
    // killed, the epilog runs, and exec.run is answered. Once per job.
    void on_shell_done(JobId id, std::optional<int> wait_status);
    void run_perilog(JobId id, LocalJob& job, const char* which, std::function<void(std::optional<std::string>)> done);
    void after_epilog(JobId id, std::function<void()> then);
    // resource.drain of this rank, with the reason (a failed prolog or epilog).
    void drain_self(const std::string& reason);
    void on_adopted_shell_gone(JobId id);
    void fail(JobId id, const std::string& note);
    void finish(JobId id, int status, double time);
    void on_reattach(const Message& req);
    // Whether this rank can tell that no task of job `id`'s run `alloc`
    // (its alloc's time, by rank 0's clock) ran here, doc/spec/shell.md §8.
    bool never_ran(JobId id, double alloc) const;
    void on_kill(const Message& req);
    void on_terminate(const Message& req);
    // exec.reconcile {keep: [ids]}: kills every job of this rank not in
    // `keep` (rank 0 ended it while this rank was cut off).
    void on_reconcile(const Message& req);
    // Every second on ranks but 0: a rank cut off from its parent for
    // tbon.lost_timeout (exec.reattach-timeout under rank 0) kills the
    // tasks of its jobs, which rank 0 ends (node-failure), and has the
    // ranks below it do the same (exec.cut-off); back, it raises
    // node-failure on each, for a rank 0 that did not see it go.
    void check_parent();
    void on_cut_off(const Message& req);
    // Kills the tasks of every job here that `which` picks, logging `why`.
    std::vector<JobId> kill_jobs(const std::function<bool(JobId)>& which, const std::string& why);
    void report_cut_off_jobs();
    void kill_now(JobId id);
    void on_stdin(const Message& req);
    void on_fence(const Message& req);
    void on_fence_data(const Message& req);
    void multicast_fence_result(JobId id, uint64_t seq, std::shared_ptr<const std::string> result,
                                std::map<uint32_t, Message> parts);
    // A fence's result (`data`: the JSON object's text, passed on
    // unparsed) to this rank's shell, once: from exec.fence-data or the
    // answer to its part, whichever comes first.
    void hand_fence_to_shell(LocalJob& job, uint64_t seq, std::string_view data);
    void on_proxy(const Message& req);
    LocalJob* job_for(const Message& req, nlohmann::json& body);
    // Forgets a job; its cgroup goes once the kernel has reaped what was
    // killed in it, retried on a timer (the loop never sleeps for it).
    void remove_job(JobId id);
    // ... on the next loop turn (not inside the shell's own callbacks), if
    // the job there is still run `launch` (a requeued job's next run may
    // have taken its place: exec.run).
    void remove_soon(JobId id, uint64_t launch);
    void retry_cgroup_removal();
    // eBPF profiles (exec_profile.cpp, doc/spec/profiling.md §5).
    static Result<EbpfRequest> read_ebpf_request(const nlohmann::json& ebpf);
    Result<std::vector<std::string>> profiler_argv() const;
    // The job's shell has started: the profiler counts it from now on, and
    // the shell hears whether it may start its tasks.
    void start_profiling(JobId id, LocalJob& job);
    // Every second: one read of every job whose interval has come.
    void sample_profiles();
    // The shell has finished: the last counters go to rank 0, then `then`.
    void end_profiling(JobId id, LocalJob& job, std::function<void()> then);

    Broker& broker_;
    Duration kill_timeout_;
    double reattach_timeout_ = 300;  // seconds
    std::string container_cache_;      // exec.container-cache, with {uid}
    uint64_t container_cache_size_ = 0;  // exec.container-cache-size, bytes
    std::string shell_path_;
    bool fork_shells_ = false;                      // Banyan's own shell: its owner's jobs' are forked (§1.1)
    std::unique_ptr<ShellForkServer> fork_server_;  // started at the first such job
    std::optional<std::string> imp_path_;
    std::optional<std::string> prolog_, epilog_;  // exec.prolog / exec.epilog
    double perilog_timeout_ =
        60;  // exec.prolog-timeout, seconds       // exec.imp: starts the shells of other users' jobs
    std::optional<std::string> cgroup_parent_;  // where job cgroups go; nullopt: none
    // Where jobs' memory is limited: in their own cgroup (the parent
    // gives its children the memory controller), else in a cgroup under
    // this broker's v1 memory one; neither: memory is not limited here.
    bool unified_memory_ = false;
    std::optional<std::string> memory_parent_v1_;
    uint32_t host_brokers_ = 1;                 // brokers of this instance on this host, this one included
    std::optional<std::string> topology_xml_;   // this machine's hwloc XML, for the shells; nullopt: none
    std::map<JobId, std::unique_ptr<LocalJob>> jobs_;
    std::unique_ptr<ProfilerLink> profiler_;  // started at the first profiled job
    // Profilers given up on (stuck), kept until they exit: destroying one
    // would wait for it.
    std::vector<std::unique_ptr<ProfilerLink>> retired_profilers_;
    std::unique_ptr<Timer> profile_tick_;
    bool profile_reading_ = false;  // a read is under way: the next tick skips
    // Shells of jobs that ended (at their finish, or before their shell
    // had started), by LocalJob::launch, until they exit.
    std::map<uint64_t, std::unique_ptr<Subprocess>> exiting_shells_;
    uint64_t launches_ = 0;
    std::map<std::pair<JobId, uint64_t>, Fence> fences_;  // at a job's first rank
    // A job's cgroup whose killed processes are still exiting: removed
    // once empty, looked at every 2 ms for its first 100 ms, then every
    // 100 ms; left in place (said once) only after a minute. A busy
    // machine takes longer than 100 ms to end them, and a cgroup given up
    // too soon stays on the host for good.
    struct EmptyingCgroup {
        JobCgroup cgroup;
        Clock::time_point since;
    };
    std::list<EmptyingCgroup> emptying_;
    std::unique_ptr<Timer> emptying_timer_;
    std::unique_ptr<Timer> parent_check_;
    Clock::time_point started_ = Clock::now();
    // This exec service's start, apart from every other of its rank: with
    // the rank and a number counted here (across jobs: a requeued job's
    // new run goes on counting), each output chunk's name, by which rank 0
    // drops one it gets twice (shell.md §8).
    uint64_t incarnation_ = 0;
    uint64_t output_chunks_ = 0;
    bool cut_off_ = false;                 // acted on, until the parent is back
    std::set<JobId> ended_while_cut_off_;  // here and below: to report once back
    // Each job's end here, in <rundir>/jobs/ended too.
    std::unique_ptr<EndedShares> ended_;
    // How far the clocks of the instance's hosts may be apart (seconds): a
    // time from rank 0 is compared with this rank's with this to spare.
    static constexpr double kClockSlack = 1.0;
};

}  // namespace banyan
