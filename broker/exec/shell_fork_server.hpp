// ShellForkServer: the exec service's `banyan-shell --fork-server`
// (doc/spec/shell.md §1.1), which forks the shells of the broker owner's
// jobs so that none pays for an execve and the dynamic loader.
#pragma once

#include <chrono>

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "core/reactor.hpp"
#include "core/result.hpp"
#include "core/unique_fd.hpp"

namespace banyan {

class ShellForkServer {
  public:
    // False in sanitizer builds: their runtimes keep per-thread state that
    // the server's raw clone3 would leave stale in the shell.
    static bool supported();
    // Starts `shell_path --fork-server`. Error: it cannot be started.
    static Result<std::unique_ptr<ShellForkServer>> start(Reactor& reactor, const std::string& shell_path);
    // Kills the server; the shells it forked are this process's children
    // and go on.
    ~ShellForkServer();

    // `refused`: nothing was started on the pipes (clone3 said no), so
    // they may be used for an executed shell instead.
    using Started = std::function<void(Result<std::unique_ptr<Subprocess>> shell, bool refused)>;
    // Asks for a shell whose stdin and stdout are `stdin_fd` and `stdout_fd`
    // (the server gets copies as the request is sent), in the cgroup
    // directory `cgroup_fd` (-1: none), in its own process group, as
    // Subprocess::spawn would start it; `on_exit` as there. The loop does
    // not wait: `started` runs on it with the answer, never inside this
    // call, requests answered in order; it may destroy this server. Errors:
    // - returned here (`started` never runs; nothing was started): EPIPE,
    //   the server had exited (usable() is false then); EAGAIN, it has
    //   kMaxWaiting requests unanswered or its socket is full;
    // - to `started` with `refused`: clone3 refused the shell (the cgroup,
    //   seccomp, an old kernel); the server stays usable;
    // - to `started` without it (no answer within a second of asking or of
    //   the answer before from a server that is not at work, or within a
    //   minute from one that is; ECONNRESET, EPROTO): a shell may have been
    //   started on these pipes, which must not be used again. The server
    //   is killed, usable() is false, and every request still waiting gets
    //   the error, on the loop (also when the server is destroyed).
    Result<void> fork_shell(int stdin_fd, int stdout_fd, int cgroup_fd, std::function<void(int wait_status)> on_exit,
                            Started started);
    bool usable() const { return usable_; }

  private:
    struct Request {
        std::function<void(int)> on_exit;
        Started started;
    };
    explicit ShellForkServer(Reactor& reactor) : reactor_(reactor), deadline_(reactor) {}
    void on_answer();
    void arm_deadline();
    void check_progress();
    // Kills the server; every waiting request gets `why`.
    void fail(Error why);
    void reap_unread_answers();

    Reactor& reactor_;
    UniqueFd socket_;
    std::unique_ptr<Subprocess> server_;
    std::unique_ptr<FdWatcher> answers_;
    std::deque<Request> waiting_;  // sent, not answered yet, oldest first
    Timer deadline_;               // for the oldest
    std::chrono::steady_clock::time_point owed_since_;  // the oldest's answer is owed since
    uint64_t last_cpu_ = 0;                             // the server's CPU time then (ticks)
    bool usable_ = true;
};

}  // namespace banyan
