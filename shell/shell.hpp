// Shell: banyan-shell's work for one job on one rank (doc/spec/shell.md).
// Reads the job from the exec service on stdin, starts the rank's tasks
// with their environment, binding, limits and PMIx server, forwards their
// output, delivers signals and input, and reports exceptions and the final
// status on stdout. Ends every process of the job before it reports. If
// its broker dies, it keeps the tasks and what it would send, and waits on
// a socket for a broker to re-attach it (doc/spec/shell.md §8).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/kept_output.hpp"
#include "core/line_channel.hpp"
#include "core/reactor.hpp"
#include "core/unique_fd.hpp"
#include "resource/machine_topology.hpp"
#include "shell/binding.hpp"
#include "shell/container.hpp"
#include "shell/instance_proxy.hpp"
#include "shell/pmi_simple.hpp"
#include "shell/pmix_server.hpp"
#include "shell/shell_job.hpp"
#include "shell/task.hpp"

namespace banyan {

class Shell {
  public:
    // Talks to the exec service over `in_fd` / `out_fd` (owned). Started by
    // banyan-imp, it runs `signed_jobspec` (what the user signed) in place
    // of the jobspec of its request.
    // `user_lock`: from banyan-imp, the job's user's lock on this node, held
    // shared (doc/spec/shell.md §1, "Shared memory").
    Shell(Reactor& reactor, int in_fd, int out_fd, std::optional<nlohmann::json> signed_jobspec = std::nullopt,
          UniqueFd user_lock = {});
    ~Shell();
    // The process's exit status once the loop stops: 0 after `finish`.
    int exit_code() const { return exit_code_; }

  private:
    // Over `in_fd` / `out_fd` (owned): the pipes, or a re-attached socket.
    void open_channel(int in_fd, int out_fd);
    void on_message(Result<nlohmann::json> message);
    void on_exec_service_gone();
    // To the exec service, or kept for the next one while there is none.
    void send(nlohmann::json message);
    void wait_for_broker();
    void stop_waiting();
    void give_up(const std::string& why);
    void on_broker_connecting();
    void attach_channel(int fd);
    void start(const nlohmann::json& request);
    Result<void> prepare();
    // Starts the tasks (at once, or at `go` when held).
    void launch();
    void launch_failed(const Error& why);
    void refuse_job(const std::string& why);
    Result<void> launch_tasks();
    bool ranks_oversubscribe(const std::vector<TaskBinding>& bindings) const;
    void warn_if_shm_small();
    void on_task_change();
    void emit_output(uint32_t task, bool is_stderr, std::string data);
    // `path` relative to the job's cwd unless absolute.
    std::string in_cwd(const std::string& path) const;
    // The fd of the file task `task`'s stdout (or stderr) goes to, opened
    // once per path; -1 when it goes to rank 0.
    Result<int> output_file(bool is_stderr, uint32_t task);
    // A fence across every shell of the job (doc/spec/shell.md §4): `data`
    // is this shell's part; `done` gets every shell's, in rank order.
    // PMIx fences and PMI-1 barriers share the one sequence.
    void fence(std::string data, std::function<void(std::string all)> done);
    void on_fence_result(const nlohmann::json& message);
    void on_proxy_request(const nlohmann::json& message);
    void raise(const std::string& type, const std::string& note, int severity);
    // MPI_Abort through PMIx or PMI-1: an `abort` exception ends the job.
    void on_abort(uint32_t task, int status, const std::string& message);
    void signal_tasks(int signo);
    void kill_everything();
    // Ends the PMIx server and removes what the job left in its run
    // directory; the tasks are gone by then.
    void release_job_files();
    // The last shell of its user on this node removes the user's files in
    // /dev/shm: what the job's tasks left there (POSIX shared memory and
    // semaphores) outlives them.
    void clean_user_shm();
    void finish();

    Reactor& reactor_;
    std::optional<nlohmann::json> signed_jobspec_;
    UniqueFd user_lock_;
    uint32_t broker_uid_ = 0;               // besides this shell's own uid, who may re-attach it
    std::unique_ptr<LineChannel> channel_;  // none while waiting to be re-attached
    bool ending_ = false;                   // the broker is stopping: end with it
    bool held_ = false;                     // prepared; the tasks wait for `go` (shell.md §7)
    bool started_ = false;                  // every local task was started
    // --profile-ebpf (doc/spec/profiling.md §5): the tasks wait for the
    // exec service's `ebpf` line; a launch that came first waits for it.
    enum class Ebpf { none, waiting, counting, off } ebpf_ = Ebpf::none;
    bool launch_waits_for_ebpf_ = false;
    std::string failed_ebpf_;  // refused before the launch: it fails then
    void on_ebpf_answer(const nlohmann::json& m);
    std::string reattach_socket_;           // where to wait for a broker; empty: do not
    double reattach_timeout_ = 0;
    UniqueFd listen_fd_;
    std::unique_ptr<FdWatcher> accept_watch_;
    Timer reattach_timer_;
    Timer socket_check_;
    std::deque<nlohmann::json> kept_;  // for the next exec service, in order
    KeptOutput kept_output_;  // how much of kept_ may be output
    std::optional<ShellJob> job_;
    std::unique_ptr<MachineTopology> topology_;
    std::unique_ptr<PmixServer> pmix_;
    std::unique_ptr<PmiSimpleServer> pmi_simple_;
    std::unique_ptr<JobContainers> containers_;  // --container: what the tasks run in
    std::unique_ptr<InstanceProxy> proxy_;  // the job is a nested instance: requests for it
    uint64_t next_fence_ = 0;
    std::map<uint64_t, std::function<void(std::string)>> fences_;  // waiting for their result
    std::vector<std::unique_ptr<Task>> tasks_;
    std::map<std::string, int> output_files_;  // path -> fd, shared by tasks writing one file
    int failed_status_ = 0;                    // a task that could not start: 126 / 127
    bool first_exit_seen_ = false;
    bool finishing_ = false;
    // The broker says `done` once it has kept the job's end (its job line
    // said `finish_ack`): until then the finish, sent, is not known to have
    // been read, and a broker that dies before takes it along.
    bool finish_acked_ = false;
    std::optional<nlohmann::json> unacked_finish_;
    bool finish_kept_ = false;    // `done` came
    bool output_paused_ = false;  // the exec service is behind (kOutputQueueLimit)
    Timer exit_timer_;
    Timer drain_timer_;
    int exit_code_ = 1;
};

}  // namespace banyan
