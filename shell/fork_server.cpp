#include "shell/fork_server.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/fork_sibling.hpp"
#include "core/unique_fd.hpp"
#include "core/unix_socket.hpp"
#include "resource/discovery.hpp"

namespace banyan {
namespace {

void answer(int socket, int32_t pid_or_error, int pidfd) {
    if (auto sent = send_fork_answer(socket, pid_or_error, pidfd); !sent) {
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
    // hwloc's plugin list, made once here (the I/O plugins left out,
    // main.cpp): no forked shell scans hwloc's directory again. Loads no
    // library and starts no thread.
    keep_hwloc_plugins_loaded();
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
        long pid = fork_sibling(&pidfd, fds.size() == 3 ? fds[2].get() : -1);
        if (pid == 0)
            return become_shell(std::move(socket), std::move(fds), flag);  // into the shell's main()
        int err = errno;
        answer(socket.get(), pid < 0 ? -err : static_cast<int32_t>(pid), pidfd);
        if (pidfd >= 0)
            close(pidfd);
    }
}

}  // namespace banyan
