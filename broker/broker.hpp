// Broker: one per node. Owns the overlay links and the local connector,
// routes requests, responses and events between them and the services it
// hosts (doc/spec/overlay.md section 7), and runs the instance lifecycle
// (join, run, shutdown).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "broker/bootstrap.hpp"
#include "broker/connector/local_connector.hpp"
#include "broker/overlay/overlay.hpp"
#include "core/message.hpp"
#include "core/reactor.hpp"

namespace banyan {

class Broker {
  public:
    using Handler = std::function<void(const Message& request)>;
    enum class State { join, run, shutdown };

    Broker(Reactor& reactor, Bootstrap bootstrap);
    ~Broker();

    // Starts the overlay, the local connector and the built-in services.
    Result<void> start();

    // Registers the handler of one method (`service.method`). This rank then
    // provides the service (the topic up to its first dot) for routing; an
    // unknown method of it gets ENOSYS. An owner-only method answers EPERM
    // to guests.
    void register_method(std::string topic, bool owner_only, Handler handler);

    // Routes a request that a service here re-addresses (e.g. to rank 0).
    void route_request(Message msg);
    // Sends `req` on to `rank` (its route already leads back to the caller).
    void forward_to(uint32_t rank, const Message& req);
    // A handler that runs `handle` at rank 0 and, on any other rank, passes
    // the request on to rank 0 (for services that only rank 0 answers).
    Handler at_rank0(Handler handle);
    // A request of the broker's own; `on_response` gets the final response
    // (an EHOSTUNREACH error if a peer on the way is lost). Its route starts
    // with this process's incarnation (`i` and 16 random hex digits), so an
    // answer to a request of an earlier process of this rank (a restart)
    // never matches one of this process's: it is dropped, and logged.
    // Returns the request's matchtag (to cancel a stream by).
    // A service of this broker handles the request before rpc() returns,
    // and one that answers at once has `on_response` called then too: a
    // caller must have its state ready before the call. There is no
    // timeout: an answer that never comes (a service that keeps the
    // request, a peer that never answers but stays) is never reported.
    uint32_t rpc(Message request, std::function<void(const Message&)> on_response);
    // The same, on behalf of user `userid` with `rolemask` (the HTTP API's
    // token holder): services apply their rules to that user.
    uint32_t rpc_as(uint32_t userid, uint32_t rolemask, Message request,
                    std::function<void(const Message&)> on_response);
    // A request of the broker's own that wants no answer (NORESPONSE):
    // no router on the way keeps it for an answer, and none comes back.
    // For a report whose only answer would be "noted", sent per rank of a
    // job: its answer would cross the tree again (overlay.md §11). A
    // request that cannot go on is dropped where it stops, logged there.
    void send(Message request);
    // Takes the response by value: a temporary moves in, payload and all.
    void respond(Message response);
    void respond_error(const Message& request, int errnum, std::string_view errstr);

    // Rank 0: gives the event the next sequence number and sends it everywhere.
    void publish_event(std::string topic, const nlohmann::json& payload, bool private_event, uint32_t userid);
    // Rank 0: events `from` to `to` as event.replay answers them
    // (doc/spec/overlay.md §8); ENOENT when some are no longer kept.
    Result<nlohmann::json> kept_events(uint32_t from, uint32_t to) const;

    // Runs `fn` once the instance is running (rank 0: the quorum is online
    // and every ready condition holds), at once if it already is.
    void when_running(std::function<void()> fn);
    // Rank 0 runs only once `condition()` is also true; call check_ready()
    // when what it looks at changes.
    void add_ready_condition(std::function<bool()> condition);
    // Calls `fn` whenever the state of a rank below this broker changes.
    void add_subtree_listener(std::function<void()> fn);
    void check_ready();

    // Shuts this broker's subtree down, leaves first (overlay.md §9);
    // `keep_jobs`: every broker of it leaves its jobs' shells running, to be
    // re-attached when it starts again.
    void begin_shutdown(std::string_view why, bool keep_jobs = false);
    // Calls `fn` once, when this broker begins to shut down (rank 0) or leaves.
    void when_shutting_down(std::function<void()> fn);
    // Leaves alone (SIGTERM): goodbye to the parent, then exit.
    void leave(bool keep_jobs);
    // Whether this broker stops leaving its jobs' shells running (the exec
    // service asks as it is destroyed).
    bool keeps_jobs() const { return keep_jobs_; }

    const Bootstrap& bootstrap() const { return boot_; }
    Reactor& reactor() { return reactor_; }
    Overlay& overlay() { return *overlay_; }
    LocalConnector& connector() { return *connector_; }
    State state() const { return state_; }
    double uptime() const;
    size_t online_count() const;

  private:
    struct Pending {
        Message request;  // without payload: enough to answer it
        uint64_t order;   // when it was sent: a lost peer's requests fail in the order they went
    };

    void on_local_request(Message&& msg, const std::string& connection);
    void on_peer_message(Message&& msg, uint32_t from);
    void on_event_from_parent(Message&& event);
    void replay_events(uint32_t from, uint32_t to);
    void renumber_events(uint32_t sequence);
    void on_peer_reset(uint32_t rank, std::string_view why);
    void on_subtree_change();
    void deliver_local(const Message& msg);
    void forward(uint32_t peer, Message msg);
    void distribute_event(const Message& event);
    void finish_shutdown();
    void notify_shutdown();

    Reactor& reactor_;
    Bootstrap boot_;
    Clock::time_point started_ = Clock::now();
    State state_ = State::join;
    // Until a clean stop decides otherwise, the jobs are kept: a broker that
    // fails to start after adopting its shells (a bad config edit, a port
    // in use) leaves them as a crash would.
    bool keep_jobs_ = true;
    std::unique_ptr<Overlay> overlay_;
    std::unique_ptr<LocalConnector> connector_;
    struct Method {
        bool owner_only;
        Handler handler;
    };
    std::map<std::string, Method, std::less<>> methods_;
    std::set<std::string, std::less<>> services_;
    // Requests forwarded to each peer, by route+matchtag, until answered.
    std::map<uint32_t, std::map<std::string, Pending>> pending_;
    uint64_t next_pending_order_ = 0;
    std::vector<std::function<void()>> running_waiters_;
    std::vector<std::function<void()>> shutdown_waiters_;
    std::vector<std::function<bool()>> ready_conditions_;
    std::vector<std::function<void()>> subtree_listeners_;
    std::map<uint32_t, std::function<void(const Message&)>> internal_rpcs_;
    uint32_t next_internal_matchtag_ = 1;
    std::string incarnation_hop_;  // the first hop of this process's own requests
    uint32_t event_sequence_ = 0;
    bool event_sequence_known_ = false;
    std::deque<Message> event_log_;     // rank 0: the last events, for event.replay
    bool replaying_ = false;            // a follower asking rank 0 for events it missed
    uint32_t replay_matchtag_ = 0;      // ... by this request
    Timer replay_timer_;                // ... asked again when it is not answered in time
    std::vector<Message> held_events_;  // ... and those that came meanwhile
    // Answers for the parent while it is away, sent in order once it is back
    // (the request may still wait there: a parent that never saw this rank
    // gone; one that did drops them).
    std::deque<Message> answers_for_parent_;
    size_t answers_for_parent_bytes_ = 0;
    void send_answers_for_parent();
    Timer shutdown_timer_;
    bool finished_ = false;
};

}  // namespace banyan
