// Unix stream sockets by path: the broker's local socket and the sockets
// of shells waiting to be re-attached. Errors name the path.
#pragma once

#include <string>

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

}  // namespace banyan
