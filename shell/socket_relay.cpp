#include "shell/socket_relay.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace banyan {
namespace {

// Queued for one side beyond which the other is no longer read.
constexpr size_t kQueueLimit = size_t{4} << 20;

void make_nonblocking(int fd) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

}  // namespace

SocketRelay::SocketRelay(Reactor& reactor, UniqueFd a, UniqueFd b) : reactor_(reactor) {
    bool duplicated = true;
    for (auto [side, fd] : {std::pair{&a_, &a}, std::pair{&b_, &b}}) {
        make_nonblocking(fd->get());
        int writer_fd = fcntl(fd->get(), F_DUPFD_CLOEXEC, 0);
        duplicated = duplicated && writer_fd >= 0;
        side->writer = std::make_unique<PipeWriter>(reactor_, writer_fd);
        side->fd = std::move(*fd);
    }
    if (!duplicated) {  // out of fds: both connections close now
        end();
        return;
    }
    // A side that drained what the other sent may read the other again.
    a_.writer->on_drained([this] {
        if (open_ && !b_.watch)
            watch(b_, a_);
    });
    b_.writer->on_drained([this] {
        if (open_ && !a_.watch)
            watch(a_, b_);
    });
    watch(a_, b_);
    watch(b_, a_);
}

void SocketRelay::watch(Side& from, Side& to) {
    from.watch = std::make_unique<FdWatcher>(reactor_, from.fd.get(), FdWatcher::Event::readable,
                                             [this, &from, &to] { on_readable(from, to); });
}

void SocketRelay::on_readable(Side& from, Side& to) {
    char buf[65536];
    ssize_t n = read(from.fd.get(), buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0)
        return end();
    to.writer->write(std::string(buf, static_cast<size_t>(n)));
    if (to.writer->queued_bytes() > kQueueLimit)
        from.watch.reset();  // until `to` drains
}

void SocketRelay::end() {
    open_ = false;
    for (Side* side : {&a_, &b_}) {
        side->watch.reset();
        side->fd.reset();
        side->writer->close();  // after what is queued for it
    }
}

}  // namespace banyan
