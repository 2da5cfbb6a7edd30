#include "broker/connector/local_connector.hpp"
#include "core/unix_socket.hpp"

#include <cstring>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/log.hpp"

namespace banyan {
namespace {
// A subscriber that stops reading is dropped once this much waits for it.
constexpr size_t kMaxQueued = 64u << 20;
// Past these a connection is not read until it is under again.
constexpr size_t kPauseQueued = 4u << 20;
constexpr size_t kMaxInFlight = 4096;
// While over a bound, reading goes on only until this much waits in the
// decoder: a client that hangs up meanwhile is still seen to go.
constexpr size_t kPausedReadCap = 1u << 20;
}  // namespace

struct LocalConnector::Connection {
    std::string id;
    int fd = -1;
    uint32_t uid = kUserIdUnknown;
    uint32_t rolemask = role::none;
    StreamDecoder decoder;
    std::string out;  // bytes not yet written
    size_t out_offset = 0;
    std::vector<std::string> subscriptions;
    size_t in_flight = 0;  // requests that want an answer, not answered yet
    bool paused = false;   // over a bound: requests wait in the decoder
    // Null while not read: over a bound, with kPausedReadCap waiting in
    // the decoder.
    std::unique_ptr<FdWatcher> reader;
    // Only while `out` is not empty. It watches a dup of `fd`: the event
    // loop (epoll) takes each descriptor number once, and `reader` has it.
    std::unique_ptr<FdWatcher> writer;
    int writer_fd = -1;
    void stop_writer() {
        writer.reset();
        if (writer_fd >= 0)
            close(writer_fd);
        writer_fd = -1;
    }
    ~Connection() {
        reader.reset();
        stop_writer();
        if (fd >= 0)
            close(fd);
    }
};

LocalConnector::LocalConnector(Reactor& reactor, std::string socket_path, uint32_t owner_uid, std::set<uint32_t> admins,
                               size_t connections_per_user, Callbacks callbacks)
    : reactor_(reactor),
      path_(std::move(socket_path)),
      owner_uid_(owner_uid),
      admins_(std::move(admins)),
      connections_per_user_(connections_per_user),
      cb_(std::move(callbacks)) {}

LocalConnector::~LocalConnector() {
    conns_.clear();
    accept_watcher_.reset();
    if (listen_fd_ >= 0) {
        close(listen_fd_);
        unlink(path_.c_str());
    }
}

Result<void> LocalConnector::start() {
    auto fd = listen_unix(path_, 256);  // replaces a stale socket of a broker that died
    if (!fd)
        return fd.error();
    listen_fd_ = fd->release();
    chmod(path_.c_str(), 0777);  // others may connect as guests; the rundir's mode decides who reaches it
    accept_watcher_ =
        std::make_unique<FdWatcher>(reactor_, listen_fd_, FdWatcher::Event::readable, [this] { on_accept(); });
    return {};
}

void LocalConnector::on_accept() {
    for (;;) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        ucred cred{};
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
            log::warning("connector", "SO_PEERCRED: {}", std::strerror(errno));
            close(fd);
            continue;
        }
        bool owner = role_of(cred.uid) == role::owner;
        if (!owner && user_connections_[cred.uid] >= connections_per_user_) {
            refuse(fd, cred.uid);
            continue;
        }
        auto conn = std::make_unique<Connection>();
        conn->fd = fd;
        conn->id = fmt::format("c{}", next_id_++);
        conn->uid = cred.uid;
        conn->rolemask = owner ? role::owner : role::user;
        if (!owner)
            user_connections_[cred.uid]++;
        Connection& c = *conn;
        std::string id = conn->id;
        conns_[id] = std::move(conn);
        update_reading(c);
    }
}

// One error answer (matchtag 0: about the connection itself, doc/spec/
// messages.md section 5), then the connection is closed.
void LocalConnector::refuse(int fd, uint32_t uid) {
    log::warning("connector", "refused a connection of uid {}: it has {} already", uid, connections_per_user_);
    Message connect = Message::request("broker.connect", nlohmann::json::object());
    std::string bytes = encode_stream(Message::error_to(
        connect, EUSERS,
        fmt::format("too many connections of uid {} to this broker (at most {}: broker.connections-per-user)", uid,
                    connections_per_user_)));
    (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
}

bool LocalConnector::over_bounds(const Connection& conn) {
    return conn.in_flight >= kMaxInFlight || conn.out.size() - conn.out_offset >= kPauseQueued;
}

void LocalConnector::update_reading(Connection& conn) {
    bool over = over_bounds(conn);
    bool read = !over || conn.decoder.buffered() < kPausedReadCap;
    if (!read && conn.reader) {
        conn.reader.reset();
    } else if (read && !conn.reader) {
        std::string id = conn.id;
        conn.reader =
            std::make_unique<FdWatcher>(reactor_, conn.fd, FdWatcher::Event::readable, [this, id] { on_readable(id); });
    }
    if (!over && conn.paused) {
        // Whole requests may wait in the decoder with nothing more to
        // read: handled soon (not here: a handler may be sending).
        std::string id = conn.id;
        reactor_.post([this, id] { handle_buffered(id); });
    }
    conn.paused = over;
}

void LocalConnector::on_readable(const std::string& id) {
    auto it = conns_.find(id);
    if (it == conns_.end())
        return;
    Connection& conn = *it->second;
    char buf[65536];
    ssize_t n = read(conn.fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        drop(id, n == 0 ? "closed" : std::strerror(errno));
        return;
    }
    if (n < 0)
        return;
    conn.decoder.feed(std::string_view(buf, static_cast<size_t>(n)));
    handle_buffered(id);
}

// Hands on each whole request read so far, while the connection is under
// its bounds.
void LocalConnector::handle_buffered(const std::string& id) {
    for (;;) {
        auto it = conns_.find(id);
        if (it == conns_.end())
            return;  // a handler dropped this connection
        Connection& conn = *it->second;
        if (over_bounds(conn)) {
            update_reading(conn);  // the rest waits in the decoder
            return;
        }
        conn.paused = false;
        auto next = conn.decoder.next();
        if (!next) {
            log::warning("connector", "dropping client {} (uid {}): {}", id, conn.uid, next.error().message);
            drop(id, "malformed input");
            return;
        }
        if (!*next)
            return;
        Message msg = std::move(**next);
        if (msg.type != MessageType::request)
            continue;  // clients only send requests
        msg.userid = conn.uid;
        msg.rolemask = conn.rolemask;
        if (msg.wants_response())
            conn.in_flight++;
        cb_.on_request(std::move(msg), id);
    }
}

void LocalConnector::send(const std::string& id, const Message& msg) {
    auto it = conns_.find(id);
    if (it == conns_.end())
        return;
    Connection& conn = *it->second;
    if (msg.is_final_response() && conn.in_flight > 0)
        conn.in_flight--;
    conn.out += encode_stream(msg);
    if (conn.out.size() - conn.out_offset > kMaxQueued) {
        log::warning("connector", "dropping client {} (uid {}): not reading its messages", id, conn.uid);
        drop(id, "too slow");
        return;
    }
    flush(conn);
}

void LocalConnector::flush(Connection& conn) {
    while (conn.out_offset < conn.out.size()) {
        ssize_t n = ::send(conn.fd, conn.out.data() + conn.out_offset, conn.out.size() - conn.out_offset,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN) {
                // Gone: dropped soon (not here: the caller still holds
                // the connection), whether or not it is being read.
                conn.out.clear();
                conn.out_offset = 0;
                std::string id = conn.id;
                reactor_.post([this, id] { drop(id, "hung up"); });
            }
            break;
        }
        conn.out_offset += static_cast<size_t>(n);
    }
    if (conn.out_offset == conn.out.size()) {
        conn.out.clear();
        conn.out_offset = 0;
        conn.stop_writer();
        update_reading(conn);
        return;
    }
    // A client that always leaves a little unread must not make `out`
    // keep every byte ever sent to it.
    if (conn.out_offset > (1u << 20) && conn.out_offset * 2 > conn.out.size()) {
        conn.out.erase(0, conn.out_offset);
        conn.out_offset = 0;
    }
    update_reading(conn);
    if (!conn.writer) {
        std::string id = conn.id;
        conn.writer_fd = fcntl(conn.fd, F_DUPFD_CLOEXEC, 0);
        if (conn.writer_fd < 0) {
            log::error("connector", "client {}: dup: {}", id, std::strerror(errno));
            return;  // the reader sees the client go, or the next send retries
        }
        conn.writer = std::make_unique<FdWatcher>(reactor_, conn.writer_fd, FdWatcher::Event::writable,
                                                  [this, id] { on_writable(id); });
    }
}

void LocalConnector::on_writable(const std::string& id) {
    auto it = conns_.find(id);
    if (it != conns_.end())
        flush(*it->second);
}

void LocalConnector::drop(const std::string& id, std::string_view why) {
    auto it = conns_.find(id);
    if (it == conns_.end())
        return;
    log::debug("connector", "client {} (uid {}) disconnected: {}", id, it->second->uid, why);
    if (auto user = user_connections_.find(it->second->uid);
        user != user_connections_.end() && !(it->second->rolemask & role::owner))
        if (--user->second == 0)
            user_connections_.erase(user);
    conns_.erase(it);
    cb_.on_disconnect(id);
}

Result<void> LocalConnector::subscribe(const std::string& id, std::string prefix) {
    auto it = conns_.find(id);
    if (it == conns_.end())
        return make_error(ENOENT, "no such connection");
    it->second->subscriptions.push_back(std::move(prefix));
    return {};
}

void LocalConnector::unsubscribe(const std::string& id, const std::string& prefix) {
    auto it = conns_.find(id);
    if (it == conns_.end())
        return;
    auto& subs = it->second->subscriptions;
    std::erase(subs, prefix);
}

void LocalConnector::deliver_event(const Message& event) {
    std::vector<std::string> targets;
    for (auto& [id, conn] : conns_) {
        if (event.has_flag(msgflag::private_event) && !(conn->rolemask & role::owner) && conn->uid != event.userid)
            continue;
        for (const auto& prefix : conn->subscriptions) {
            if (event.topic.compare(0, prefix.size(), prefix) == 0) {
                targets.push_back(id);
                break;
            }
        }
    }
    for (const auto& id : targets)
        send(id, event);
}

uint32_t LocalConnector::role_of(uint32_t uid) const {
    return uid == owner_uid_ || uid == 0 || admins_.count(uid) ? role::owner : role::user;
}

}  // namespace banyan
