// Reactor: the event loop every Banyan process runs (a Boost.Asio
// io_context), and RAII handles for what hangs on it: timers, file
// descriptors, signals and child processes. Destroying a handle stops it;
// no callback runs after its handle is gone. Single-threaded: callbacks run
// inside run() on the calling thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include <boost/asio/io_context.hpp>

#include "core/result.hpp"

namespace banyan {

using Clock = std::chrono::steady_clock;
using Duration = std::chrono::steady_clock::duration;

class Reactor {
  public:
    Reactor();
    Reactor(const Reactor&) = delete;
    Reactor& operator=(const Reactor&) = delete;

    // Runs callbacks until stop() is called (an idle loop keeps waiting).
    void run();
    // Like run(), but returns after `limit` at the latest.
    void run_for(Duration limit);
    void stop();
    // Queues `fn` to run on the loop soon (never inside this call).
    void post(std::function<void()> fn);

    boost::asio::io_context& io() { return io_; }

  private:
    boost::asio::io_context io_;
};

// A one-shot or repeating timer.
class Timer {
  public:
    explicit Timer(Reactor& reactor);
    ~Timer();
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

    // (Re)arms the timer; any earlier arming is cancelled first.
    void start(Duration after, std::function<void()> fn);
    void start_repeating(Duration period, std::function<void()> fn);
    void cancel();
    bool active() const;

  private:
    struct State;
    static void arm(const std::shared_ptr<State>& state, Duration after);
    std::shared_ptr<State> state_;
};

// Calls `fn` each time `fd` becomes readable (or writable), until destroyed
// or stop()ped. Never closes `fd`: the caller owns it.
class FdWatcher {
  public:
    enum class Event { readable, writable };
    FdWatcher(Reactor& reactor, int fd, Event event, std::function<void()> fn);
    ~FdWatcher();
    FdWatcher(const FdWatcher&) = delete;
    FdWatcher& operator=(const FdWatcher&) = delete;
    void stop();

  private:
    struct State;
    static void arm(const std::shared_ptr<State>& state);
    std::shared_ptr<State> state_;
};

// Calls `fn(signo)` for each delivery of the given signals.
class SignalWatcher {
  public:
    SignalWatcher(Reactor& reactor, std::vector<int> signals, std::function<void(int)> fn);
    ~SignalWatcher();
    SignalWatcher(const SignalWatcher&) = delete;
    SignalWatcher& operator=(const SignalWatcher&) = delete;

  private:
    struct State;
    static void arm(const std::shared_ptr<State>& state);
    std::shared_ptr<State> state_;
};

struct SpawnOptions {
    std::vector<std::string> argv;                // argv[0] is looked up in PATH
    std::string program;                          // what to execute instead of argv[0]; empty: argv[0]
    std::optional<std::vector<std::string>> env;  // "K=V" list; nullopt: inherit
    std::string cwd;                              // empty: inherit
    bool new_process_group = true;                // so signal() reaches descendants
    bool new_session = false;  // and a session of its own: no controlling terminal (a job's task)
    // With new_session: its stdin, a terminal, becomes its controlling one
    // (a task run with --pty).
    bool controlling_terminal = false;
    int stdin_fd = -1;                            // -1: inherit
    int stdout_fd = -1;
    int stderr_fd = -1;
    int fd3 = -1;           // placed as the child's fd 3 (banyan-imp's request); -1: none
    std::vector<int> cpus;  // CPUs the child may run on; empty: inherit
    int cgroup_fd = -1;     // a cgroup v2 directory the child starts in; -1: ours
    // A cgroup v1 directory the child joins before it executes (none can
    // be started in one): as the parent's user, so before a setuid
    // program it runs changes who it is. -1: none.
    int join_cgroup_fd = -1;
    // A container's namespaces (doc/spec/shell.md §9) the child joins
    // before it changes directory, so it runs inside and finds its cwd
    // there; -1: none. A child that cannot join them fails, never runs
    // outside.
    int user_ns_fd = -1;
    int mount_ns_fd = -1;
    // Every descriptor above those placed (0-2, fd3) is closed in the child
    // unless this is set: only for a user's own command run as a shell
    // would run it (`banyan start COMMAND`: its <(...) and jobserver fds).
    bool keep_descriptors = false;
};

// A child process, started with clone3 (and exec) and watched through a pidfd.
// `on_exit(wait_status)` runs once, on the loop, when it ends. Destroying a
// Subprocess that still runs kills its process group and reaps it, so no
// child outlives its handle.
class Subprocess {
  public:
    // Error: the program cannot be executed (ENOENT, EACCES, ...), with the
    // program name in the message.
    static Result<std::unique_ptr<Subprocess>> spawn(Reactor& reactor, const SpawnOptions& options,
                                                     std::function<void(int wait_status)> on_exit);
    // Takes charge of a child of this process that another process started
    // for it (clone3 with CLONE_PARENT: the shell fork server, doc/spec/
    // shell.md §1.1): `pidfd` (owned) is watched as spawn's is; `own_group`:
    // it leads a process group of its own.
    static std::unique_ptr<Subprocess> adopt(Reactor& reactor, pid_t pid, int pidfd, bool own_group,
                                             std::function<void(int wait_status)> on_exit);
    ~Subprocess();
    Subprocess(const Subprocess&) = delete;
    Subprocess& operator=(const Subprocess&) = delete;

    pid_t pid() const { return pid_; }
    bool running() const { return running_; }
    // Lets it run on past this handle (a job's shell that a broker which
    // stops leaves to be re-attached): destruction no longer kills it, and
    // `on_exit` never runs.
    void disown() {
        watcher_.reset();
        running_ = false;
    }
    // Sends `signo` to the process group (or the process when it has none).
    Result<void> signal(int signo);

  private:
    Subprocess() = default;
    void on_pidfd_readable();

    pid_t pid_ = -1;
    int pidfd_ = -1;
    bool own_group_ = false;
    bool running_ = true;
    std::function<void(int)> on_exit_;
    std::unique_ptr<FdWatcher> watcher_;
};

// Exit code in shell convention from a wait status: the exit status, or
// 128+N for death by signal N.
int exit_code_from_wait_status(int wait_status);

}  // namespace banyan
