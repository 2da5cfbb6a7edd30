// Unix stream sockets by path: the broker's local socket and the sockets
// of shells waiting to be re-attached. Errors name the path. And
// descriptors passed in datagrams (SCM_RIGHTS): the shell fork server's.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "core/unique_fd.hpp"

namespace banyan {

enum class Wait { yes, no };
// A connected socket (close-on-exec). Wait::no: non-blocking, and a
// listener whose backlog is full is EAGAIN at once, not a wait.
Result<UniqueFd> connect_unix(const std::string& path, Wait wait = Wait::yes);
// A listening socket (non-blocking, close-on-exec) at `path`; a socket
// left there by a process that died is replaced.
Result<UniqueFd> listen_unix(const std::string& path, int backlog);

// Sends `data` as one message on the connected `socket` with `fds`
// attached (at most 8), never raising SIGPIPE. Blocks as the socket does.
// Error: sendmsg's errno (EPIPE: the peer is gone).
Result<void> send_with_fds(int socket, std::string_view data, std::span<const int> fds);
// Receives one message into `buffer` and the descriptors sent with it
// (close-on-exec, owned by the caller, appended to `fds`); returns its
// length, 0 when the peer closed. Blocks as the socket does. Error:
// recvmsg's errno; EMSGSIZE when the message or its descriptors did not
// fit (those that came are closed).
Result<size_t> receive_with_fds(int socket, std::span<char> buffer, std::vector<UniqueFd>& fds);

}  // namespace banyan
