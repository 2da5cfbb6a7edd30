// Overlay: this broker's links in the tree (doc/spec/overlay.md sections
// 1-6, 9): a ROUTER for its children and a DEALER to its parent, CURVE
// security, hello, heartbeats, torpid/lost detection, subtree health.
// It passes requests, responses and events on to the broker's router and
// never routes by itself.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "broker/bootstrap.hpp"
#include "broker/overlay/resolver.hpp"
#include "broker/overlay/zap.hpp"
#include "broker/overlay/zmq_reader.hpp"
#include "core/idset.hpp"
#include "core/message.hpp"
#include "core/reactor.hpp"

namespace banyan {

enum class PeerState { offline, online, torpid, lost };
std::string_view to_string(PeerState state);

// The state of every rank in a subtree.
struct SubtreeStates {
    IdSet online, torpid, lost, offline;
    nlohmann::json to_json() const;
    static Result<SubtreeStates> from_json(const nlohmann::json& j);
    bool operator==(const SubtreeStates&) const = default;
};

namespace control {
constexpr uint32_t heartbeat = 0;
constexpr uint32_t goodbye = 1;
constexpr uint32_t shutdown = 2;
constexpr uint32_t reconnect = 3;
constexpr uint32_t renumber = 4;  // status: the new event sequence (overlay.md §8)
}  // namespace control

struct OverlayCallbacks {
    // A request or response from the peer at rank `from`.
    std::function<void(Message&&, uint32_t from)> on_message;
    std::function<void(Message&&)> on_event;  // from the parent
    // Everything in flight through `rank` is lost (it left, died, restarted).
    // `why` completes "rank N is ...": lost, offline, restarted,
    // reconnecting (...).
    std::function<void(uint32_t rank, std::string_view why)> on_peer_reset;
    // The parent answered hello; `sequence` is its last event sequence,
    // none from a parent that has not joined its own since it started.
    std::function<void(std::optional<uint32_t> sequence)> on_parent_ready;
    std::function<void(bool keep_jobs)> on_shutdown_request;  // SHUTDOWN from the parent
    // RENUMBER from the parent: rank 0 started again and numbers events
    // from `sequence` + 1.
    std::function<void(uint32_t sequence)> on_renumber;
    std::function<void()> on_subtree_change;
};

class Overlay {
  public:
    Overlay(Reactor& reactor, const Bootstrap& bootstrap, OverlayCallbacks callbacks);
    ~Overlay();

    // Binds (if this rank has children) and starts joining the parent.
    Result<void> start();

    // Error EHOSTUNREACH (with the peer's state) when the peer is not up.
    Result<void> send_to_parent(const Message& msg);
    Result<void> send_to_child(uint32_t rank, const Message& msg);
    void send_event_to_children(const Message& event);
    // SHUTDOWN to every child up; `keep_jobs`: with kShutdownKeepsJobs.
    void send_shutdown_to_children(bool keep_jobs);
    // RENUMBER to every child up, and `sequence` is what a child's hello
    // is answered from now on.
    void send_renumber_to_children(uint32_t sequence);
    // Tells the parent this broker leaves cleanly; lingers so it is delivered.
    void say_goodbye();

    bool parent_ready() const { return parent_ready_; }
    // When the parent was last heard from (the clock's epoch: never).
    Clock::time_point parent_last_seen() const { return parent_last_seen_; }
    size_t children_up() const;
    PeerState child_state(uint32_t rank) const;
    // The protocol a child's hello said it speaks (§3.1); 0 for one never heard.
    uint32_t child_protocol(uint32_t rank) const;
    // The protocol the parent's answer to this broker's hello said; 0 before one.
    uint32_t parent_protocol() const { return parent_protocol_; }
    SubtreeStates subtree() const;
    nlohmann::json status() const;

  private:
    struct Child {
        PeerState state = PeerState::offline;
        std::string uuid;
        uint32_t protocol = 0;  // from its hello
        Clock::time_point last_seen{};
        std::optional<SubtreeStates> report;  // its last overlay.health
    };

    // The PAIR end of a socket monitor for disconnects and failed
    // handshakes. Throws zmq::error_t, like the socket calls around it.
    std::unique_ptr<zmq::socket_t> attach_monitor(zmq::socket_t& socket, const std::string& uri);
    Result<void> bind_children();
    void on_child_frames(Frames&& frames);
    void on_hello(uint32_t rank, const Message& msg);
    void set_child_state(uint32_t rank, PeerState state, std::string_view why);

    void connect_parent();
    void open_dealer(const std::string& uri);
    void close_dealer();
    void reconnect_parent(std::string_view why);
    void on_parent_frames(Frames&& frames);
    void on_hello_response(const Message& msg);

    void on_monitor(zmq::socket_t& monitor, bool is_router);
    void probe_children();
    void probe_once();
    void on_tick();
    void send_heartbeats();
    void schedule_health_report();
    void send_health_report();
    void subtree_changed();

    Reactor& reactor_;
    const Bootstrap& boot_;
    OverlayCallbacks cb_;
    std::string uuid_;
    zmq::context_t context_;
    std::unique_ptr<ZapAuthenticator> zap_;

    // Children side.
    std::unique_ptr<zmq::socket_t> router_;
    std::unique_ptr<ZmqReader> router_reader_;
    std::unique_ptr<zmq::socket_t> router_monitor_;
    std::unique_ptr<ZmqReader> router_monitor_reader_;
    std::map<uint32_t, Child> children_;
    Timer probe_timer_;
    uint64_t refused_handshakes_ = 0;
    Clock::time_point last_refusal_log_{};
    int probes_left_ = 0;

    // Parent side.
    std::unique_ptr<zmq::socket_t> dealer_;
    std::unique_ptr<ZmqReader> dealer_reader_;
    std::unique_ptr<zmq::socket_t> dealer_monitor_;
    std::unique_ptr<ZmqReader> dealer_monitor_reader_;
    bool parent_ready_ = false;
    uint32_t parent_protocol_ = 0;
    bool handshake_error_logged_ = false;
    uint32_t hello_matchtag_ = 0;
    uint32_t next_matchtag_ = 1;
    Clock::time_point parent_last_seen_{};
    Duration backoff_{};
    Timer hello_timer_;
    Timer reconnect_timer_;
    int socket_generation_ = 0;
    bool resolving_ = false;  // this attempt waits for the parent's address
    Clock::time_point joining_since_ = Clock::now();
    Clock::time_point last_join_warning_{};

    Timer tick_timer_;
    Timer heartbeat_timer_;
    Timer health_timer_;
    std::optional<SubtreeStates> last_report_;
    // What a child's hello is answered with: unknown to a broker that has
    // not joined its parent since it started (rank 0: known, from 0).
    std::optional<uint32_t> last_event_sequence_;
    EndpointResolver resolver_;  // last: its answers may touch everything above
};

}  // namespace banyan
