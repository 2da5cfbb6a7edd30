// ShellForkServer: the exec service's `banyan-shell --fork-server`
// (doc/spec/shell.md §1.1), which forks the shells of the broker owner's
// jobs so that none pays for an execve and the dynamic loader.
#pragma once

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

    // A shell whose stdin and stdout are `stdin_fd` and `stdout_fd` (not
    // taken: the server gets copies), in the cgroup directory `cgroup_fd`
    // (-1: none), in its own process group, as Subprocess::spawn would
    // start it; `on_exit` as there. Waits for the server's answer, a
    // second at most. Errors:
    // - clone3 refused it (the cgroup, seccomp, an old kernel): its errno;
    //   the server stays usable and nothing was started;
    // - EPIPE: the server had exited; nothing was started;
    // - anything else (no answer in time, ECONNRESET, EPROTO): a shell may
    //   have been started on these pipes, which must not be used again.
    // After an error other than the first kind, the server is killed and
    // usable() is false.
    Result<std::unique_ptr<Subprocess>> fork_shell(int stdin_fd, int stdout_fd, int cgroup_fd,
                                                   std::function<void(int wait_status)> on_exit);
    bool usable() const { return usable_; }

  private:
    ShellForkServer(Reactor& reactor) : reactor_(reactor) {}
    Error fail(Error why);

    Reactor& reactor_;
    UniqueFd socket_;
    std::unique_ptr<Subprocess> server_;
    bool usable_ = true;
};

}  // namespace banyan
