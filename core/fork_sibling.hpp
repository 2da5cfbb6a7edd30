// fork_sibling: fork() whose child is this process's parent's child.
#pragma once

#include <cstdint>

#include "core/result.hpp"

namespace banyan {

// clone3 with CLONE_PARENT and CLONE_PIDFD. The child returns 0 and runs on
// a copy of this stack, as after fork(); the caller gets its pid and owns
// *pidfd, which it hands to the parent (who reaps the child: its death is
// the parent's to see, and this process may end first). -1 with errno on
// failure, *pidfd then -1. cgroup_fd >= 0: the child starts in that cgroup
// v2 directory (CLONE_INTO_CGROUP). Only in a process with one thread:
// unlike fork(), nothing of the C library's own state is reset.
long fork_sibling(int* pidfd, int cgroup_fd = -1);

// A forker's answer on its SOCK_SEQPACKET `socket`: the int32 pid, with
// the pidfd attached (when >= 0), or -errno alone. Error: sendmsg's.
Result<void> send_fork_answer(int socket, int32_t pid_or_error, int pidfd);

// False in a sanitizer build, whose runtime keeps state that a child
// forked so (without fork()'s resets) would share: there, programs are
// executed each instead (the shell fork server, `banyan start`'s brokers).
bool fork_sibling_supported();

}  // namespace banyan
