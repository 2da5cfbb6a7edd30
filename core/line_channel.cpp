#include "core/line_channel.hpp"

#include <cerrno>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include "core/json_parse.hpp"
#include "core/log.hpp"

namespace banyan {

LineChannel::LineChannel(Reactor& reactor, int read_fd, int write_fd,
                         std::function<void(Result<nlohmann::json>)> on_message, std::function<void()> on_close,
                         size_t max_line)
    : read_fd_(read_fd),
      writer_(reactor, write_fd),
      on_message_(std::move(on_message)),
      on_close_(std::move(on_close)),
      max_line_(max_line),
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
        take(std::string_view(buf, static_cast<size_t>(n)));
    }
}

void LineChannel::take(std::string_view chunk) {
    while (!chunk.empty()) {
        size_t nl = chunk.find('\n');
        if (dropping_) {
            if (nl == std::string_view::npos)
                return;
            dropping_ = false;
            chunk.remove_prefix(nl + 1);
            continue;
        }
        size_t length = nl == std::string_view::npos ? chunk.size() : nl;
        if (partial_.size() + length > max_line_) {
            partial_.clear();
            partial_.shrink_to_fit();
            dropping_ = nl == std::string_view::npos;
            deliver(make_error(EMSGSIZE, fmt::format("a line over {} bytes: dropped", max_line_)));
        } else if (nl == std::string_view::npos) {
            partial_.append(chunk);
            return;
        } else if (partial_.empty()) {
            handle_line(chunk.substr(0, nl));
        } else {
            partial_.append(chunk.substr(0, nl));
            handle_line(partial_);
            partial_.clear();
        }
        if (nl == std::string_view::npos)
            return;
        chunk.remove_prefix(nl + 1);
    }
}

void LineChannel::handle_line(std::string_view line) {
    if (line.empty())
        return;
    auto doc = parse_json(line);
    if (!doc || !doc->is_object())
        deliver(make_error(EPROTO, "a line that is not a JSON object"));
    else
        deliver(std::move(*doc));
}

// A handler that throws loses its line, not the lines after it (nor does
// the line come again on the next read).
void LineChannel::deliver(Result<nlohmann::json> message) {
    try {
        on_message_(std::move(message));
    } catch (const std::exception& e) {
        log::error("line-channel", "a line could not be handled: {}", e.what());
    }
}

}  // namespace banyan
