#include "core/client.hpp"
#include "core/programs.hpp"
#include "core/unix_socket.hpp"

#include <cstdlib>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>

namespace banyan {

Result<Client> Client::connect(std::string uri) {
    if (uri.empty()) {
        const char* env = std::getenv("BANYAN_URI");
        if (!env || !*env) {
            // The system instance (banyan.service), as Slurm's commands
            // find slurmctld on a login node.
            auto fd = connect_unix(kSystemSocket);
            if (!fd)
                return make_error(ENOENT, fmt::format("no instance: BANYAN_URI is not set and no system instance "
                                                      "answers at {} ({}); run inside `banyan start`, or start "
                                                      "banyan.service",
                                                      kSystemSocket, fd.error().message));
            return Client(fd->release(), kSystemSocket);
        }
        uri = env;
    }
    std::vector<JobId> via;
    if (size_t hash = uri.find('#'); hash != std::string::npos) {
        std::string_view jobs = std::string_view(uri).substr(hash + 1);
        while (!jobs.empty()) {
            size_t slash = jobs.find('/');
            auto id = parse_jobid(jobs.substr(0, slash));
            if (!id)
                return make_error(EINVAL, fmt::format("{}: after '#': {}", uri, id.error().message));
            via.push_back(*id);
            jobs.remove_prefix(slash == std::string_view::npos ? jobs.size() : slash + 1);
        }
        uri.resize(hash);
    }
    std::string path = uri.rfind("local://", 0) == 0 ? uri.substr(8) : uri;
    auto fd = connect_unix(path);
    if (!fd)
        return make_error(fd.error().code, "no broker: " + fd.error().message);
    Client client(fd->release(), path);
    client.via_ = std::move(via);
    return client;
}

std::string Client::uri() const {
    std::string out = "local://" + path_;
    for (size_t i = 0; i < via_.size(); i++)
        out += (i == 0 ? "#" : "/") + format_jobid(via_[i]);
    return out;
}

Client::Client(Client&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      via_(std::move(other.via_)),
      next_matchtag_(other.next_matchtag_),
      decoder_(std::move(other.decoder_)) {}

Client& Client::operator=(Client&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0)
            close(fd_);
        fd_ = std::exchange(other.fd_, -1);
        path_ = std::move(other.path_);
        via_ = std::move(other.via_);
        next_matchtag_ = other.next_matchtag_;
        decoder_ = std::move(other.decoder_);
    }
    return *this;
}

Client::~Client() {
    if (fd_ >= 0)
        close(fd_);
}

Result<uint32_t> Client::send(Message msg) {
    if (msg.type == MessageType::request && !msg.has_flag(msgflag::noresponse) && msg.matchtag == 0)
        msg.matchtag = next_matchtag_++;
    if (msg.type == MessageType::request && !via_.empty()) {
        // Innermost job first: each level's job manager unwraps one.
        auto payload = msg.json();
        if (!payload)
            return payload.error();
        std::string topic = msg.topic;
        uint32_t nodeid = msg.nodeid;
        for (auto it = via_.rbegin(); it != via_.rend(); ++it) {
            *payload = {{"id", *it}, {"request", {{"topic", topic}, {"payload", *payload}, {"nodeid", nodeid}}}};
            topic = "job-manager.proxy";
            nodeid = kNodeIdAny;
        }
        Message wrapped = Message::request(topic, *payload, nodeid);
        wrapped.matchtag = msg.matchtag;
        wrapped.flags = msg.flags;
        msg = std::move(wrapped);
    }
    std::string bytes = encode_stream(msg);
    size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            done += static_cast<size_t>(n);
            continue;
        }
        int err = errno;
        if (err == EINTR)
            continue;
        if (err == EAGAIN) {
            // The broker reads a connection only while it takes its
            // answers (banyan-broker(8)): take them meanwhile, for recv(),
            // so neither side waits on the other.
            pollfd pfd{fd_, POLLIN | POLLOUT, 0};
            if (poll(&pfd, 1, -1) > 0 && (pfd.revents & POLLIN))
                take_available();
            continue;
        }
        if (err == EPIPE || err == ECONNRESET) {
            // The broker may have said why before it closed (a refused
            // connection, doc/spec/messages.md section 5).
            auto why = recv(std::chrono::milliseconds(100));
            if (!why && why.error().code != ECONNRESET && why.error().code != ETIMEDOUT)
                return why.error();
        }
        return make_error(err, fmt::format("send to broker: {}", std::strerror(err)));
    }
    return msg.matchtag;
}

void Client::take_available() {
    char buf[65536];
    for (;;) {
        ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0)
            return;  // nothing more now, or closed: recv() will say
        decoder_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
}

Result<Message> Client::recv(std::optional<std::chrono::milliseconds> timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout.value_or(std::chrono::milliseconds(0));
    for (;;) {
        auto next = decoder_.next();
        if (!next)
            return next.error();
        if (*next) {
            // An error answer to no request is the broker's word on the
            // connection itself (doc/spec/messages.md section 5).
            if ((*next)->type == MessageType::response && (*next)->matchtag == 0 && (*next)->errnum != 0)
                return make_error(static_cast<int>((*next)->errnum), (*next)->error_text());
            return std::move(**next);
        }
        int wait_ms = -1;
        if (timeout) {
            auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0)
                return make_error(ETIMEDOUT, "timed out waiting for the broker");
            wait_ms = static_cast<int>(left.count());
        }
        pollfd pfd{fd_, POLLIN, 0};
        int rc = poll(&pfd, 1, wait_ms);
        if (rc < 0 && errno != EINTR)
            return make_error(errno, fmt::format("poll: {}", std::strerror(errno)));
        if (rc <= 0)
            continue;
        char buf[65536];
        ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n == 0)
            return make_error(ECONNRESET, "the broker closed the connection");
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return make_error(errno, fmt::format("receive from broker: {}", std::strerror(errno)));
        }
        decoder_.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
}

Result<nlohmann::json> response_payload(const Message& response) {
    if (response.errnum != 0)
        return make_error(static_cast<int>(response.errnum), response.error_text());
    return response.json();
}

Result<nlohmann::json> Client::rpc(std::string topic, const nlohmann::json& body, uint32_t nodeid,
                                   std::optional<std::chrono::milliseconds> timeout) {
    auto tag = send(Message::request(std::move(topic), body, nodeid));
    if (!tag)
        return tag.error();
    for (;;) {
        auto msg = recv(timeout);
        if (!msg)
            return msg.error();
        if (msg->type == MessageType::response && msg->matchtag == *tag)
            return response_payload(*msg);
        // Anything else (an event, a stray response) is not ours: skip it.
    }
}

}  // namespace banyan
