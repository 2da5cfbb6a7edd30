#include "shell/fork_server.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/unique_fd.hpp"
#include "core/unix_socket.hpp"

namespace banyan {
namespace {

void answer(int socket, int32_t pid_or_error, int pidfd) {
    std::string_view bytes(reinterpret_cast<const char*>(&pid_or_error), sizeof pid_or_error);
    std::vector<int> fds;
    if (pidfd >= 0)
        fds.push_back(pidfd);
    if (auto sent = send_with_fds(socket, bytes, fds); !sent) {
        // The exec service is gone: it will not ask again.
        std::fprintf(stderr, "banyan-shell --fork-server: %s\n", sent.error().message.c_str());
        _exit(0);
    }
}

// In the forked shell: its own process group, the job's pipes at 0 and 1.
void become_shell(UniqueFd socket, std::vector<UniqueFd> fds, char* flag) {
    socket.reset();
    std::memset(flag, 0, std::strlen(flag));
    if (setpgid(0, 0) != 0)
        std::fprintf(stderr, "banyan-shell: setpgid: %s\n", std::strerror(errno));
    if (dup2(fds[0].get(), 0) < 0 || dup2(fds[1].get(), 1) < 0) {
        std::fprintf(stderr, "banyan-shell: placing its pipes: %s\n", std::strerror(errno));
        _exit(1);
    }
    // fds (the pipes' other numbers, the cgroup's directory) close here.
}

}  // namespace

void serve_forks(char* flag) {
    // Set by the exec service for the dynamic loader only (shell_fork_server.cpp).
    unsetenv("LD_BIND_NOW");
    // A received pipe must never land on fd 1 or 2 (a broker started with
    // them closed): each shell's dup2 would close it again.
    for (int fd : {1, 2})
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_WRONLY) != fd)
            _exit(2);
    // The socket moves off fd 0: each shell gets its pipe there.
    UniqueFd socket(fcntl(0, F_DUPFD_CLOEXEC, 3));
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!socket || devnull < 0 || dup2(devnull, 0) < 0) {
        std::perror("banyan-shell --fork-server");
        _exit(2);
    }
    close(devnull);
    for (;;) {
        char request = 0;
        std::vector<UniqueFd> fds;
        auto n = receive_with_fds(socket.get(), {&request, 1}, fds);
        if (!n) {
            if (n.error().code == ENOTSOCK) {
                std::fprintf(stderr, "banyan-shell: --fork-server is started by the exec service, not by hand\n");
                _exit(2);
            }
            if (n.error().code == EMSGSIZE) {
                answer(socket.get(), -EPROTO, -1);
                continue;
            }
            std::fprintf(stderr, "banyan-shell --fork-server: %s\n", n.error().message.c_str());
            _exit(1);
        }
        if (*n == 0)
            _exit(0);  // the broker stopped or died
        if (request != 'f' || fds.size() < 2 || fds.size() > 3) {
            answer(socket.get(), -EPROTO, -1);
            continue;
        }
        int pidfd = -1;
        clone_args args{};
        args.flags = CLONE_PARENT | CLONE_PIDFD | (fds.size() == 3 ? CLONE_INTO_CGROUP : 0);
        args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
        // exit_signal stays 0: clone3 refuses one with CLONE_PARENT, and gives
        // the child this process's own (SIGCHLD, to the broker).
        args.cgroup = fds.size() == 3 ? static_cast<uint64_t>(fds[2].get()) : 0;
        // No stack of its own: the child runs on a copy of this one, as
        // after fork(), and returns from here into the shell's main().
        long pid = syscall(SYS_clone3, &args, sizeof args);
        if (pid == 0)
            return become_shell(std::move(socket), std::move(fds), flag);
        int err = errno;
        // A clone3 that failed late (the job's cgroup removed meanwhile)
        // has written a pidfd number it then released: not an fd here.
        if (pid < 0)
            pidfd = -1;
        answer(socket.get(), pid < 0 ? -err : static_cast<int32_t>(pid), pidfd);
        if (pidfd >= 0)
            close(pidfd);
    }
}

}  // namespace banyan
