#include "core/unix_socket.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace banyan {
namespace {

// A socket's address. A path longer than sun_path (nested instances' run
// directories lie deep in their jobs' directories) is reached through its
// directory, held open: /proc/self/fd/N/NAME.
struct Address {
    sockaddr_un addr{};
    UniqueFd dir;
};

Result<Address> address_of(const std::string& path) {
    Address a;
    a.addr.sun_family = AF_UNIX;
    std::string usable = path;
    if (path.size() >= sizeof a.addr.sun_path) {
        size_t slash = path.rfind('/');
        std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
        a.dir = UniqueFd(open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!a.dir)
            return make_error(errno, fmt::format("{}: {}", dir, std::strerror(errno)));
        usable = fmt::format("/proc/self/fd/{}/{}", a.dir.get(), path.substr(slash + 1));
    }
    if (usable.size() >= sizeof a.addr.sun_path)
        return make_error(ENAMETOOLONG, fmt::format("{}: socket name too long ({} bytes, at most {})", path,
                                                    usable.size(), sizeof a.addr.sun_path - 1));
    std::memcpy(a.addr.sun_path, usable.c_str(), usable.size() + 1);
    return a;
}

}  // namespace

Result<UniqueFd> connect_unix(const std::string& path, Wait wait) {
    auto addr = address_of(path);
    if (!addr)
        return addr.error();
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (wait == Wait::no ? SOCK_NONBLOCK : 0), 0));
    if (!fd)
        return make_error(errno, fmt::format("socket: {}", std::strerror(errno)));
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr->addr), sizeof addr->addr) < 0)
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
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr->addr), sizeof addr->addr) < 0 ||
        listen(fd.get(), backlog) < 0)
        return make_error(errno, fmt::format("{}: {}", path, std::strerror(errno)));
    return fd;
}

}  // namespace banyan
