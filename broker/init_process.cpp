#include "broker/init_process.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace banyan {
namespace {

[[noreturn]] void run_init(pid_t broker) {
    sigset_t all;
    sigfillset(&all);
    for (;;) {
        int signo = sigwaitinfo(&all, nullptr);
        if (signo < 0)
            continue;  // EINTR
        if (signo != SIGCHLD) {
            kill(broker, signo);
            continue;
        }
        int status = 0;
        for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
            if (pid != broker)
                continue;  // an orphan: reaped, nothing more
            std::_Exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        }
    }
}

}  // namespace

void become_init_if_pid1() {
    if (getpid() != 1)
        return;
    // Blocked before the fork, so that no signal is lost between it and
    // sigwaitinfo; the child unblocks them.
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t broker = fork();
    if (broker < 0) {
        std::fprintf(stderr, "banyan-broker: PID 1 cannot fork a reaper (%s); orphans will not be reaped\n",
                     std::strerror(errno));
        sigprocmask(SIG_SETMASK, &old, nullptr);
        return;
    }
    if (broker == 0) {
        sigprocmask(SIG_SETMASK, &old, nullptr);
        return;
    }
    prctl(PR_SET_NAME, "banyan-init");
    run_init(broker);
}

}  // namespace banyan
