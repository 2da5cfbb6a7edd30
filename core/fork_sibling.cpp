#include "core/fork_sibling.hpp"

#include <linux/sched.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/unix_socket.hpp"

namespace banyan {

long fork_sibling(int* pidfd, int cgroup_fd) {
    *pidfd = -1;
    clone_args args{};
    args.flags = CLONE_PARENT | CLONE_PIDFD | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
    args.pidfd = reinterpret_cast<uint64_t>(pidfd);
    // exit_signal stays 0: clone3 refuses one with CLONE_PARENT, and gives
    // the child this process's own (SIGCHLD, to the parent).
    args.cgroup = cgroup_fd >= 0 ? static_cast<uint64_t>(cgroup_fd) : 0;
    // No stack of its own: the child runs on a copy of this one.
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid < 0) {
        // A clone3 that failed late (the cgroup removed meanwhile) has
        // written a pidfd number it then released: not a descriptor here.
        int err = errno;
        *pidfd = -1;
        errno = err;
    }
    return pid;
}

Result<void> send_fork_answer(int socket, int32_t pid_or_error, int pidfd) {
    std::string_view bytes(reinterpret_cast<const char*>(&pid_or_error), sizeof pid_or_error);
    std::vector<int> fds;
    if (pidfd >= 0)
        fds.push_back(pidfd);
    return send_with_fds(socket, bytes, fds);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BANYAN_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BANYAN_SANITIZED 1
#endif

bool fork_sibling_supported() {
#ifdef BANYAN_SANITIZED
    return false;
#else
    return true;
#endif
}

}  // namespace banyan
