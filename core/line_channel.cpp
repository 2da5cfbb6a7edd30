#include "core/line_channel.hpp"

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

#include "core/json_parse.hpp"
#include "core/log.hpp"

namespace banyan {

LineChannel::LineChannel(Reactor& reactor, int read_fd, int write_fd,
                         std::function<void(Result<nlohmann::json>)> on_message, std::function<void()> on_close)
    : read_fd_(read_fd),
      writer_(reactor, write_fd),
      on_message_(std::move(on_message)),
      on_close_(std::move(on_close)),
      reactor_(reactor) {
    fcntl(read_fd_, F_SETFL, fcntl(read_fd_, F_GETFL) | O_NONBLOCK);
    resume_reading();
}

void LineChannel::pause_reading() {
    read_watch_.reset();
}

void LineChannel::resume_reading() {
    if (read_fd_ >= 0 && !read_watch_)
        read_watch_ =
            std::make_unique<FdWatcher>(reactor_, read_fd_, FdWatcher::Event::readable, [this] { read_available(); });
}

LineChannel::~LineChannel() {
    read_watch_.reset();
    if (read_fd_ >= 0)
        close(read_fd_);
}

std::string LineChannel::line_of(const nlohmann::json& message) {
    return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void LineChannel::send_line(std::string line) {
    line += '\n';
    writer_.write(std::move(line));
}

void LineChannel::read_available() {
    if (read_fd_ < 0)
        return;
    char buf[65536];
    for (;;) {
        ssize_t n = read(read_fd_, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            read_watch_.reset();
            close(read_fd_);
            read_fd_ = -1;
            if (on_close_)
                on_close_();  // may destroy this channel: nothing after it
            return;
        }
        partial_.append(buf, static_cast<size_t>(n));
        size_t start = 0;
        for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
            std::string_view line(partial_.data() + start, nl - start);
            if (line.empty())
                continue;
            auto doc = parse_json(line);
            // A handler that throws loses its line, not the lines after it
            // (nor does the line come again on the next read).
            try {
                if (!doc || !doc->is_object())
                    on_message_(make_error(EPROTO, "a line that is not a JSON object"));
                else
                    on_message_(std::move(*doc));
            } catch (const std::exception& e) {
                log::error("line-channel", "a line could not be handled: {}", e.what());
            }
        }
        partial_.erase(0, start);
    }
}

}  // namespace banyan
