#include "core/pipe_writer.hpp"

#include <cerrno>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

namespace banyan {

PipeWriter::PipeWriter(Reactor& reactor, int fd) : reactor_(reactor), fd_(fd) {
    if (fd_ >= 0)
        fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

PipeWriter::~PipeWriter() {
    watch_.reset();
    if (fd_ >= 0)
        ::close(fd_);
}

void PipeWriter::write(std::string bytes) {
    if (fd_ < 0 || closing_ || bytes.empty())
        return;
    queued_bytes_ += bytes.size();
    queue_.push_back(std::move(bytes));
    if (!watch_)
        on_writable();
}

std::deque<std::string> PipeWriter::take_unwritten() {
    queued_bytes_ = 0;
    written_ = 0;
    watch_.reset();
    return std::exchange(queue_, {});
}

void PipeWriter::close() {
    closing_ = true;
    if (!watch_)
        on_writable();
}

void PipeWriter::on_writable() {
    while (!queue_.empty() && fd_ >= 0) {
        const std::string& front = queue_.front();
        ssize_t n = ::write(fd_, front.data() + written_, front.size() - written_);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            if (!watch_)
                watch_ = std::make_unique<FdWatcher>(reactor_, fd_, FdWatcher::Event::writable, [this] { on_writable(); });
            return;
        }
        if (n < 0) {  // the reader is gone: nothing more can be said
            queue_.clear();
            queued_bytes_ = 0;
            written_ = 0;
            break;
        }
        written_ += static_cast<size_t>(n);
        if (written_ == front.size()) {
            queued_bytes_ -= front.size();
            queue_.pop_front();
            written_ = 0;
        }
    }
    watch_.reset();
    if (queue_.empty() && closing_ && fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    if (queue_.empty() && on_drained_)
        on_drained_();
}

void PipeWriter::flush(int timeout_ms) {
    watch_.reset();
    while (!queue_.empty() && fd_ >= 0) {
        pollfd p{fd_, POLLOUT, 0};
        if (poll(&p, 1, timeout_ms) <= 0)
            return;
        on_writable();
        watch_.reset();
    }
}

}  // namespace banyan
