#include "core/unix_socket.hpp"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace banyan {
namespace {

Result<sockaddr_un> address_of(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path)
        return make_error(ENAMETOOLONG, fmt::format("{}: socket path too long ({} bytes, at most {})", path,
                                                    path.size(), sizeof addr.sun_path - 1));
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    return addr;
}

}  // namespace

Result<UniqueFd> connect_unix(const std::string& path, Wait wait) {
    auto addr = address_of(path);
    if (!addr)
        return addr.error();
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (wait == Wait::no ? SOCK_NONBLOCK : 0), 0));
    if (!fd)
        return make_error(errno, fmt::format("socket: {}", std::strerror(errno)));
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof *addr) < 0)
        return make_error(errno, fmt::format("cannot connect to {}: {}", path, std::strerror(errno)));
    return fd;
}

Result<UniqueFd> listen_unix(const std::string& path, int backlog) {
    auto addr = address_of(path);
    if (!addr)
        return addr.error();
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd)
        return make_error(errno, fmt::format("socket: {}", std::strerror(errno)));
    unlink(path.c_str());
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof *addr) < 0 || listen(fd.get(), backlog) < 0)
        return make_error(errno, fmt::format("{}: {}", path, std::strerror(errno)));
    return fd;
}

}  // namespace banyan
