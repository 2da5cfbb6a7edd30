#include "shell/instance_proxy.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/json_field.hpp"
#include "core/unix_socket.hpp"

namespace banyan {

InstanceProxy::InstanceProxy(Reactor& reactor, std::function<void(uint64_t, nlohmann::json)> answer)
    : reactor_(reactor), answer_(std::move(answer)) {}

InstanceProxy::~InstanceProxy() = default;

void InstanceProxy::answer_error(uint64_t tag, int errnum, const std::string& text) {
    answer_(tag, {{"errnum", errnum}, {"errstr", text}});
}

void InstanceProxy::forward(uint64_t tag, const std::string& uri, const nlohmann::json& request) {
    auto topic = json_field<std::string>(request, "topic", "", "request");
    auto nodeid = json_field<uint32_t>(request, "nodeid", kNodeIdAny, "request");
    if (auto e = first_error(topic, nodeid))
        return answer_error(tag, EPROTO, e->message);
    if (topic->empty() || topic->size() > kMaxTopic)
        return answer_error(tag, EPROTO, "request.topic: expected 1 to 255 characters");
    if (!request.contains("payload") || !request["payload"].is_object())
        return answer_error(tag, EPROTO, "request.payload: expected an object");
    if (!uri.starts_with("local://"))
        return answer_error(tag, EINVAL, fmt::format("{}: not a local:// URI", uri));
    if (fd_ && uri != uri_)
        close_all("the instance's URI changed");
    if (!fd_) {
        auto fd = connect_unix(uri.substr(8));
        if (!fd)
            return answer_error(tag, fd.error().code, "the job's instance: " + fd.error().message);
        fd_ = std::move(*fd);
        uri_ = uri;
        fcntl(fd_.get(), F_SETFL, fcntl(fd_.get(), F_GETFL) | O_NONBLOCK);
        writer_ = std::make_unique<PipeWriter>(reactor_, fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
        watch_ =
            std::make_unique<FdWatcher>(reactor_, fd_.get(), FdWatcher::Event::readable, [this] { on_readable(); });
        decoder_ = StreamDecoder();
    }
    Message msg = Message::request(*topic, request["payload"], *nodeid);
    msg.matchtag = next_matchtag_++;
    waiting_[msg.matchtag] = tag;
    writer_->write(encode_stream(msg));
}

void InstanceProxy::on_readable() {
    char buf[65536];
    ssize_t n = read(fd_.get(), buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0)
        return close_all("the job's instance closed the connection");
    decoder_.feed(std::string_view(buf, static_cast<size_t>(n)));
    for (;;) {
        auto next = decoder_.next();
        if (!next)
            return close_all("the job's instance: " + next.error().message);
        if (!*next)
            return;
        const Message& m = **next;
        auto it = waiting_.find(m.matchtag);
        if (m.type != MessageType::response || it == waiting_.end())
            continue;
        uint64_t tag = it->second;
        waiting_.erase(it);
        if (m.errnum != 0) {
            answer_error(tag, static_cast<int>(m.errnum), m.error_text());
            continue;
        }
        auto payload = m.json();
        if (!payload)
            answer_error(tag, EPROTO, payload.error().message);
        else
            answer_(tag, {{"payload", std::move(*payload)}});
    }
}

void InstanceProxy::close_all(const std::string& why) {
    watch_.reset();
    writer_.reset();
    fd_.reset();
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (const auto& [matchtag, tag] : waiting)
        answer_error(tag, ECONNRESET, why);
}

}  // namespace banyan
