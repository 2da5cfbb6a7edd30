// LocalConnector: the broker's unix socket for local clients (the CLI,
// shells). Each connection is identified by SO_PEERCRED: the instance
// owner (and root) get the owner role, other users the user role. The
// connector stamps every request with the caller's uid and role, so a
// client can never claim another identity. Messages use the stream framing
// of doc/spec/messages.md section 5.
//
// What one connection may make the broker hold is bounded: one message
// being read (the decoder), kMaxInFlight requests awaiting their answers
// and kPauseQueued bytes of answers not yet written; past either bound the
// connector stops reading that connection until it is under again (the
// client waits in write). Events are pushed without asking, so a
// subscriber that stops reading is dropped past kMaxQueued. A user other
// than the owner may hold at most `connections_per_user` connections; one
// more is answered with one error and closed.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/message.hpp"
#include "core/reactor.hpp"
#include "core/result.hpp"

namespace banyan {

class LocalConnector {
  public:
    struct Callbacks {
        // A request from connection `id` (already stamped with userid/rolemask).
        std::function<void(Message&&, const std::string& id)> on_request;
        std::function<void(const std::string& id)> on_disconnect;
    };

    // `admins`: uids treated as the owner (access.admins).
    LocalConnector(Reactor& reactor, std::string socket_path, uint32_t owner_uid, std::set<uint32_t> admins,
                   size_t connections_per_user, Callbacks callbacks);
    ~LocalConnector();

    // Creates the socket (replacing a stale one). Error names the path.
    Result<void> start();
    const std::string& path() const { return path_; }

    // Queues `msg` for connection `id`; dropped when it is gone.
    void send(const std::string& id, const Message& msg);
    // Subscriptions by topic prefix; events go to every matching connection
    // the event's PRIVATE flag allows.
    Result<void> subscribe(const std::string& id, std::string prefix);
    void unsubscribe(const std::string& id, const std::string& prefix);
    void deliver_event(const Message& event);
    size_t connections() const { return conns_.size(); }
    // The role a user of this uid gets here: owner for the instance's
    // owner, root and access.admins; user for everyone else.
    uint32_t role_of(uint32_t uid) const;
    static bool is_connection_id(std::string_view hop) { return !hop.empty() && hop[0] == 'c'; }

  private:
    struct Connection;
    void on_accept();
    void on_readable(const std::string& id);
    void on_writable(const std::string& id);
    void flush(Connection& conn);
    void handle_buffered(const std::string& id);
    static bool over_bounds(const Connection& conn);
    // Reads the connection only while it is under its bounds.
    void update_reading(Connection& conn);
    void refuse(int fd, uint32_t uid);
    void drop(const std::string& id, std::string_view why);

    Reactor& reactor_;
    std::string path_;
    uint32_t owner_uid_;
    std::set<uint32_t> admins_;
    size_t connections_per_user_;
    std::map<uint32_t, size_t> user_connections_;  // guests' open connections, by uid
    Callbacks cb_;
    int listen_fd_ = -1;
    std::unique_ptr<FdWatcher> accept_watcher_;
    std::map<std::string, std::unique_ptr<Connection>> conns_;
    uint64_t next_id_ = 1;
};

}  // namespace banyan
