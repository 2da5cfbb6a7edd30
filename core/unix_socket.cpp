#include "core/unix_socket.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

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

namespace {
constexpr size_t kMaxPassedFds = 8;
}

Result<void> send_with_fds(int socket, std::string_view data, std::span<const int> fds) {
    if (fds.size() > kMaxPassedFds)
        return make_error(EINVAL, fmt::format("{} descriptors in one message (at most {})", fds.size(), kMaxPassedFds));
    iovec iov{const_cast<char*>(data.data()), data.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n;
    while ((n = sendmsg(socket, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    if (n < 0)
        return make_error(errno, fmt::format("sendmsg: {}", std::strerror(errno)));
    return {};
}

Result<size_t> receive_with_fds(int socket, std::span<char> buffer, std::vector<UniqueFd>& fds) {
    iovec iov{buffer.data(), buffer.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n;
    while ((n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
    }
    if (n < 0)
        return make_error(errno, fmt::format("recvmsg: {}", std::strerror(errno)));
    size_t before = fds.size();
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            fds.emplace_back(fd);
        }
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        fds.resize(before);
        return make_error(EMSGSIZE, "recvmsg: the message or its descriptors did not fit");
    }
    return static_cast<size_t>(n);
}

}  // namespace banyan
