#include "broker/overlay/overlay.hpp"

#include <cstring>
#include <random>

#include <fmt/format.h>

#include "core/json_field.hpp"
#include "core/log.hpp"

namespace banyan {
namespace {

// The hello's `version`, which brokers of protocol 1 require to be this
// (they know no `protocol`).
constexpr const char* kProtocol1Version = "0.1.0";
constexpr auto kHealthDelay = std::chrono::milliseconds(20);
constexpr auto kFirstBackoff = std::chrono::milliseconds(10);

Duration seconds(double s) {
    return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

std::string make_uuid() {
    std::random_device rd;
    std::uniform_int_distribution<uint32_t> dist;
    return fmt::format("{:08x}{:08x}{:08x}{:08x}", dist(rd), dist(rd), dist(rd), dist(rd));
}

void set_common_options(zmq::socket_t& s, const Bootstrap& boot) {
    s.set(zmq::sockopt::sndhwm, 0);  // never drop: liveness handles dead peers
    s.set(zmq::sockopt::rcvhwm, 0);
    s.set(zmq::sockopt::linger, 0);
    // A handshake that stalls fails (and is retried) rather than hanging.
    s.set(zmq::sockopt::handshake_ivl, static_cast<int>(boot.hello_timeout * 1000));
    // A peer that vanished without a reset (a pod replaced on a new IP, a
    // host powered off) closes the connection within tbon.tcp_timeout:
    // keepalive probes when the link is idle, TCP_USER_TIMEOUT when data
    // waits unacknowledged. Both are the kernels' business, so a broker that
    // is alive but stuck (SIGSTOP) keeps its link and turns torpid instead.
    int timeout_s = std::max(1, static_cast<int>(boot.tcp_timeout));
    s.set(zmq::sockopt::tcp_keepalive, 1);
    s.set(zmq::sockopt::tcp_keepalive_idle, std::max(1, timeout_s / 2));
    s.set(zmq::sockopt::tcp_keepalive_intvl, std::max(1, timeout_s / 6));
    s.set(zmq::sockopt::tcp_keepalive_cnt, 3);
    s.set(zmq::sockopt::tcp_maxrt, static_cast<int>(boot.tcp_timeout * 1000));
}

// A socket monitor's event frame: the event and its value (an errno or a
// ZMQ_PROTOCOL_ERROR_* code).
std::pair<uint16_t, uint32_t> monitor_event(const Frames& f) {
    uint16_t event = 0;
    uint32_t value = 0;
    if (f.size() >= 2 && f[0].size() == 6) {
        std::memcpy(&event, f[0].data(), 2);
        std::memcpy(&value, f[0].data() + 2, 4);
    }
    return {event, value};
}

constexpr int kMonitorEvents = ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
// Name lookups of the parent's host running at once, at most. A lookup can
// hang for the resolver's timeouts (seen: 50 s while podman's DNS server
// restarted); a later one, started once DNS answers again, must not wait
// for it. One starts per attempt (every few seconds), so this is rarely hit.
constexpr int kMaxLookups = 16;
// Not joined for this long: say why at warning level (then once a minute).
constexpr auto kJoinWarnAfter = std::chrono::seconds(30);

}  // namespace

std::string_view to_string(PeerState state) {
    switch (state) {
        case PeerState::offline:
            return "offline";
        case PeerState::online:
            return "online";
        case PeerState::torpid:
            return "torpid";
        case PeerState::lost:
            return "lost";
    }
    return "?";
}

nlohmann::json SubtreeStates::to_json() const {
    return {{"online", online.format()},
            {"torpid", torpid.format()},
            {"lost", lost.format()},
            {"offline", offline.format()}};
}

Result<SubtreeStates> SubtreeStates::from_json(const nlohmann::json& j) {
    SubtreeStates s;
    for (auto [key, set] : {std::pair{"online", &s.online}, std::pair{"torpid", &s.torpid}, std::pair{"lost", &s.lost},
                            std::pair{"offline", &s.offline}}) {
        if (!j.contains(key) || !j[key].is_string())
            return make_error(EPROTO, fmt::format("overlay.health: '{}' must be an idset string", key));
        auto parsed = IdSet::parse(j[key].get<std::string>());
        if (!parsed)
            return parsed.error();
        *set = std::move(*parsed);
    }
    return s;
}

Overlay::Overlay(Reactor& reactor, const Bootstrap& bootstrap, OverlayCallbacks callbacks)
    : reactor_(reactor),
      boot_(bootstrap),
      cb_(std::move(callbacks)),
      uuid_(make_uuid()),
      context_(1),
      probe_timer_(reactor),
      hello_timer_(reactor),
      reconnect_timer_(reactor),
      tick_timer_(reactor),
      heartbeat_timer_(reactor),
      health_timer_(reactor),
      resolver_(reactor) {
    for (uint32_t c : boot_.children())
        children_[c] = Child{};
}

Overlay::~Overlay() {
    // Readers and monitors go before their sockets, sockets before the context.
    router_monitor_reader_.reset();
    router_monitor_.reset();
    dealer_monitor_reader_.reset();
    dealer_monitor_.reset();
    router_reader_.reset();
    dealer_reader_.reset();
    router_.reset();
    dealer_.reset();
    zap_.reset();
}

Result<void> Overlay::start() {
    if (!boot_.parent())
        last_event_sequence_ = 0;  // rank 0 numbers the events
    if (boot_.cert) {
        auto zap = ZapAuthenticator::start(reactor_, context_, boot_.cert->public_key);
        if (!zap)
            return zap.error();
        zap_ = std::move(*zap);
    }
    if (!children_.empty())
        if (auto r = bind_children(); !r)
            return r;
    if (boot_.parent())
        connect_parent();
    double tick = std::min({boot_.heartbeat_period, boot_.torpid_timeout / 2, boot_.lost_timeout / 2});
    tick_timer_.start_repeating(seconds(tick), [this] { on_tick(); });
    heartbeat_timer_.start_repeating(seconds(boot_.heartbeat_period), [this] { send_heartbeats(); });
    return {};
}

std::unique_ptr<zmq::socket_t> Overlay::attach_monitor(zmq::socket_t& socket, const std::string& uri) {
    if (zmq_socket_monitor(socket.handle(), uri.c_str(), kMonitorEvents) != 0)
        throw zmq::error_t();
    auto monitor = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pair);
    monitor->connect(uri);
    return monitor;
}

// --- children --------------------------------------------------------------

Result<void> Overlay::bind_children() {
    try {
        router_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
        set_common_options(*router_, boot_);
        router_->set(zmq::sockopt::router_mandatory, 1);
        router_->set(zmq::sockopt::router_handover, 1);
        if (boot_.cert) {
            router_->set(zmq::sockopt::curve_server, 1);
            router_->set(zmq::sockopt::curve_secretkey, boot_.cert->secret_key);
            router_->set(zmq::sockopt::zap_domain, "banyan");
        }
        router_monitor_ = attach_monitor(*router_, fmt::format("inproc://monitor-router-{}", boot_.rank));
        router_->bind(boot_.bind_uri);
    } catch (const zmq::error_t& e) {
        return make_error(e.num(), fmt::format("cannot bind {}: {}", boot_.bind_uri, e.what()));
    }
    router_reader_ =
        std::make_unique<ZmqReader>(reactor_, *router_, [this](Frames&& f) { on_child_frames(std::move(f)); });
    router_monitor_reader_ = std::make_unique<ZmqReader>(reactor_, *router_monitor_, [this](Frames&& f) {
        auto [event, value] = monitor_event(f);
        if (event == ZMQ_EVENT_DISCONNECTED) {
            probe_children();
            return;
        }
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            // The peer gave up (its hello timed out) or the link broke: no
            // verdict on its certificate.
            log::debug("overlay", "a connection on {} ended during its handshake ({})", f.size() > 1 ? f[1] : "?",
                       std::strerror(static_cast<int>(value)));
            return;
        }
        if (event == 0)
            return;
        // A stranger retries forever: say so once, then once a minute.
        refused_handshakes_++;
        auto now = Clock::now();
        if (now - last_refusal_log_ < std::chrono::minutes(1) && last_refusal_log_ != Clock::time_point{})
            return;
        last_refusal_log_ = now;
        log::error("overlay",
                   "refused connection on {}: CURVE handshake failed "
                   "(a broker with another certificate?); {} so far",
                   f.size() > 1 ? f[1] : "?", refused_handshakes_);
    });
    log::debug("overlay", "listening on {}", boot_.bind_uri);
    return {};
}

void Overlay::on_child_frames(Frames&& frames) {
    if (frames.size() < 2)
        return;
    std::string identity = std::move(frames.front());
    frames.erase(frames.begin());
    auto rank = parse_decimal(identity, IdSet::kMaxId, "peer");
    auto decoded = decode(frames);
    if (!decoded) {
        log::warning("overlay", "dropped message from peer '{}': {}", identity, decoded.error().message);
        return;
    }
    Message& msg = *decoded;
    auto it = rank ? children_.find(static_cast<uint32_t>(*rank)) : children_.end();
    if (msg.type == MessageType::request && msg.topic == "overlay.hello") {
        if (it == children_.end()) {
            log::error("overlay", "refused hello from '{}': not a child of rank {}", identity, boot_.rank);
            Message err =
                Message::error_to(msg, EPERM, fmt::format("'{}' is not a child of rank {}", identity, boot_.rank));
            (void)send_frames(*router_, encode(err), &identity);
            router_reader_->poke();
            return;
        }
        on_hello(it->first, msg);
        return;
    }
    if (it == children_.end())
        return;
    Child& child = it->second;
    if (child.state != PeerState::online && child.state != PeerState::torpid) {
        // It does not know it was dropped (lost, or we restarted): tell it.
        (void)send_frames(*router_, encode(Message::control(control::reconnect, 0)), &identity);
        router_reader_->poke();
        return;
    }
    child.last_seen = Clock::now();
    if (child.state == PeerState::torpid)
        set_child_state(it->first, PeerState::online, "spoke again");
    if (msg.type == MessageType::control) {
        if (msg.control_type == control::goodbye)
            set_child_state(it->first, PeerState::offline, "left");
        return;
    }
    if (msg.type == MessageType::request && msg.topic == "overlay.health") {
        auto body = msg.json();
        auto states = body ? SubtreeStates::from_json(*body) : Result<SubtreeStates>(body.error());
        if (!states) {
            log::warning("overlay", "bad overlay.health from rank {}: {}", it->first, states.error().message);
            return;
        }
        child.report = std::move(*states);
        subtree_changed();
        return;
    }
    if (msg.type == MessageType::event)
        return;  // events only flow down
    cb_.on_message(std::move(msg), it->first);
}

void Overlay::on_hello(uint32_t rank, const Message& msg) {
    auto body = msg.json();
    std::string identity = std::to_string(rank);
    auto refuse = [&](int errnum, std::string why) {
        log::error("overlay", "refused hello from rank {}: {}", rank, why);
        (void)send_frames(*router_, encode(Message::error_to(msg, errnum, why)), &identity);
        router_reader_->poke();
    };
    if (!body || !body->contains("uuid") || !(*body)["uuid"].is_string())
        return refuse(EPROTO, "malformed hello");
    auto protocol = json_field<uint32_t>(*body, "protocol", 1u, "overlay.hello");  // none: protocol 1
    if (!protocol)
        return refuse(EPROTO, protocol.error().message);
    if (!protocols_interoperate(*protocol, boot_.protocol))
        return refuse(EPROTO,
                      fmt::format("rank {} speaks overlay protocol {} and rank {} protocol {}: brokers more than "
                                  "one version apart do not interoperate (upgrade one version at a time)",
                                  rank, *protocol, boot_.rank, boot_.protocol));
    Child& child = children_[rank];
    if (child.protocol != 0 && child.protocol != *protocol)
        log::info("overlay", "rank {} now speaks overlay protocol {} (was {})", rank, *protocol, child.protocol);
    child.protocol = *protocol;
    std::string uuid = (*body)["uuid"].get<std::string>();
    std::string host = json_field(*body, "hostname", std::string("?")).value_or("?");
    if (child.state == PeerState::online || child.state == PeerState::torpid) {
        if (child.uuid != uuid) {
            log::warning("overlay", "rank {} ({}) restarted", rank, host);
            cb_.on_peer_reset(rank, "restarted");
        }
    }
    bool was_up = child.state == PeerState::online;
    child.uuid = uuid;
    child.last_seen = Clock::now();
    child.report.reset();
    // No sequence while this broker knows none (it started again and has
    // not joined its parent yet): a 0 would make the child take it for a
    // rank 0 that numbers anew, renumber its subtree, and deliver again
    // what it had.
    nlohmann::json answer = {{"rank", boot_.rank}, {"protocol", boot_.protocol}};
    if (last_event_sequence_)
        answer["sequence"] = *last_event_sequence_;
    Message ok = Message::response_to(msg, std::move(answer));
    (void)send_frames(*router_, encode(ok), &identity);
    router_reader_->poke();
    if (!was_up)
        log::info("overlay", "rank {} ({}) joined", rank, host);
    set_child_state(rank, PeerState::online, "joined");
    subtree_changed();
}

void Overlay::set_child_state(uint32_t rank, PeerState state, std::string_view why) {
    Child& child = children_[rank];
    if (child.state == state)
        return;
    PeerState old = child.state;
    child.state = state;
    if (state == PeerState::lost || state == PeerState::offline) {
        child.report.reset();
        if (old == PeerState::online || old == PeerState::torpid) {
            if (state == PeerState::lost)
                log::error("overlay", "rank {} is lost: {}", rank, why);
            else
                log::info("overlay", "rank {} is offline: {}", rank, why);
            cb_.on_peer_reset(rank, state == PeerState::lost ? "lost" : "offline");
        }
    } else if (state == PeerState::torpid) {
        log::warning("overlay", "rank {} is torpid: silent for {:.1f}s", rank,
                     std::chrono::duration<double>(Clock::now() - child.last_seen).count());
    } else if (old == PeerState::torpid) {
        log::info("overlay", "rank {} is no longer torpid", rank);
    }
    subtree_changed();
}

void Overlay::probe_children() {
    // A connection closed; ZeroMQ forgets the peer a moment later. Sending to
    // each child finds the one that is gone (EHOSTUNREACH). Probe a few
    // times (1, 5, 20, 80 ms later) since the forgetting is asynchronous.
    probes_left_ = 4;
    probe_timer_.start(std::chrono::milliseconds(1), [this] { probe_once(); });
}

void Overlay::probe_once() {
    // A child that left cleanly sent GOODBYE before closing: read it first,
    // so that it is marked offline rather than lost.
    router_reader_->drain();
    for (auto& [rank, child] : children_) {
        if (child.state != PeerState::online && child.state != PeerState::torpid)
            continue;
        std::string identity = std::to_string(rank);
        auto r = send_frames(*router_, encode(Message::control(control::heartbeat, 0)), &identity);
        if (!r && r.error().code == EHOSTUNREACH)
            set_child_state(rank, PeerState::lost, "connection closed");
    }
    router_reader_->poke();
    if (--probes_left_ > 0)
        probe_timer_.start(std::chrono::milliseconds(5 << (2 * (3 - probes_left_))), [this] { probe_once(); });
}

Result<void> Overlay::send_to_child(uint32_t rank, const Message& msg) {
    auto it = children_.find(rank);
    if (it == children_.end())
        return make_error(EHOSTUNREACH, fmt::format("rank {} is not a child of rank {}", rank, boot_.rank));
    if (it->second.state != PeerState::online && it->second.state != PeerState::torpid)
        return make_error(EHOSTUNREACH, fmt::format("rank {} is {}", rank, to_string(it->second.state)));
    std::string identity = std::to_string(rank);
    auto r = send_frames(*router_, encode(msg), &identity);
    router_reader_->poke();
    if (!r && r.error().code == EHOSTUNREACH) {
        set_child_state(rank, PeerState::lost, "connection closed");
        return make_error(EHOSTUNREACH, fmt::format("rank {} is lost", rank));
    }
    return r;
}

void Overlay::send_event_to_children(const Message& event) {
    last_event_sequence_ = event.sequence;
    Frames frames = encode(event);
    for (auto& [rank, child] : children_) {
        if (child.state != PeerState::online && child.state != PeerState::torpid)
            continue;
        std::string identity = std::to_string(rank);
        auto r = send_frames(*router_, frames, &identity);
        if (!r && r.error().code == EHOSTUNREACH)
            set_child_state(rank, PeerState::lost, "connection closed");
    }
    if (router_reader_)
        router_reader_->poke();
}

void Overlay::send_shutdown_to_children(bool keep_jobs) {
    for (auto& [rank, child] : children_) {
        if (child.state != PeerState::online && child.state != PeerState::torpid)
            continue;
        if (keep_jobs && child.protocol < 2)
            log::warning("overlay", "rank {} speaks overlay protocol {}: it ends its jobs as it shuts down", rank,
                         child.protocol);
        (void)send_to_child(rank, Message::control(control::shutdown, keep_jobs ? kShutdownKeepsJobs : 0));
    }
}

void Overlay::send_renumber_to_children(uint32_t sequence) {
    last_event_sequence_ = sequence;
    for (auto& [rank, child] : children_)
        if (child.state == PeerState::online || child.state == PeerState::torpid)
            (void)send_to_child(rank, Message::control(control::renumber, sequence));
}

size_t Overlay::children_up() const {
    size_t n = 0;
    for (const auto& [rank, child] : children_)
        n += child.state == PeerState::online || child.state == PeerState::torpid;
    return n;
}

PeerState Overlay::child_state(uint32_t rank) const {
    auto it = children_.find(rank);
    return it == children_.end() ? PeerState::offline : it->second.state;
}

uint32_t Overlay::child_protocol(uint32_t rank) const {
    auto it = children_.find(rank);
    return it == children_.end() ? 0 : it->second.protocol;
}

// --- parent ----------------------------------------------------------------

void Overlay::close_dealer() {
    dealer_monitor_reader_.reset();
    dealer_monitor_.reset();
    dealer_reader_.reset();
    dealer_.reset();
}

// An attempt: resolve the parent's host name (off the loop), connect, say
// hello; tbon.hello_timeout after the attempt starts, it starts over.
void Overlay::connect_parent() {
    if (parent_ready_) {  // not expected: every caller has dropped the parent first
        parent_ready_ = false;
        cb_.on_peer_reset(*boot_.parent(), "reconnecting");
    }
    close_dealer();
    resolving_ = true;
    hello_timer_.start(seconds(boot_.hello_timeout), [this] {
        reconnect_parent(resolving_ ? "its host name did not resolve in time" : "no answer to hello");
    });
    if (resolver_.in_flight() >= kMaxLookups)
        return;  // one of the lookups still running answers this attempt
    resolver_.resolve(boot_.parent_uri, [this](Result<std::string> uri) {
        if (!resolving_)
            return;  // answered after its attempt gave up: the next one asks again
        if (!uri) {
            if (resolver_.in_flight() == 0)
                reconnect_parent(uri.error().message);
            return;
        }
        resolving_ = false;
        open_dealer(*uri);
    });
}

void Overlay::open_dealer(const std::string& uri) {
    socket_generation_++;
    handshake_error_logged_ = false;
    try {
        dealer_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
        set_common_options(*dealer_, boot_);
        dealer_->set(zmq::sockopt::routing_id, std::to_string(boot_.rank));
        dealer_->set(zmq::sockopt::reconnect_ivl, 10);
        dealer_->set(zmq::sockopt::reconnect_ivl_max, static_cast<int>(boot_.connect_max_backoff * 1000));
        if (uri.rfind("tcp://[", 0) == 0)
            dealer_->set(zmq::sockopt::ipv6, 1);
        if (boot_.cert) {
            dealer_->set(zmq::sockopt::curve_serverkey, boot_.cert->public_key);
            dealer_->set(zmq::sockopt::curve_publickey, boot_.cert->public_key);
            dealer_->set(zmq::sockopt::curve_secretkey, boot_.cert->secret_key);
        }
        dealer_monitor_ =
            attach_monitor(*dealer_, fmt::format("inproc://monitor-dealer-{}-{}", boot_.rank, socket_generation_));
        dealer_->connect(uri);
    } catch (const zmq::error_t& e) {
        log::error("overlay", "cannot connect to parent at {}: {}", uri, e.what());
        close_dealer();
        reconnect_parent("connect failed");
        return;
    }
    dealer_reader_ =
        std::make_unique<ZmqReader>(reactor_, *dealer_, [this](Frames&& f) { on_parent_frames(std::move(f)); });
    dealer_monitor_reader_ = std::make_unique<ZmqReader>(reactor_, *dealer_monitor_, [this, uri](Frames&& f) {
        auto [event, value] = monitor_event(f);
        if (event == ZMQ_EVENT_DISCONNECTED) {
            // The parent went away (or the kernel gave up on the link,
            // tbon.tcp_timeout): start over, resolving its name again (a pod
            // replaced on a new IP).
            if (parent_ready_)
                reconnect_parent("connection to the parent closed");
        } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && (value == EAGAIN || value == ETIMEDOUT)) {
            // ZeroMQ's handshake_ivl (tbon.hello_timeout) ran out: slow, not refused.
            reconnect_parent(fmt::format("handshake with {} timed out", uri));
        } else if (event != 0) {
            // The parent closed the link mid-handshake (EPIPE, ECONNRESET):
            // it could not decrypt us, so our certificate is not its own.
            if (!handshake_error_logged_)
                log::error("overlay", "parent at {} refused us: CURVE handshake failed (is curve_cert the cluster's?)",
                           uri);
            handshake_error_logged_ = true;
            reconnect_parent("CURVE handshake refused");
        }
    });
    Message hello = Message::request("overlay.hello",
                                     {{"rank", boot_.rank},
                                      {"uuid", uuid_},
                                      {"version", kProtocol1Version},
                                      {"protocol", boot_.protocol},
                                      {"hostname", boot_.hostname}},
                                     *boot_.parent());
    hello.routed = true;
    hello_matchtag_ = hello.matchtag = next_matchtag_++;
    (void)send_frames(*dealer_, encode(hello));
    dealer_reader_->poke();
    hello_timer_.start(seconds(boot_.hello_timeout), [this] { reconnect_parent("no answer to hello"); });
}

void Overlay::reconnect_parent(std::string_view why) {
    bool was_ready = parent_ready_;
    parent_ready_ = false;
    resolving_ = false;
    hello_timer_.cancel();
    if (reconnect_timer_.active())
        return;  // a retry is already due (two monitor events, say)
    auto now = Clock::now();
    if (was_ready) {
        log::warning("overlay", "lost parent rank {}: {}; reconnecting", *boot_.parent(), why);
        cb_.on_peer_reset(*boot_.parent(), fmt::format("reconnecting ({})", why));
        joining_since_ = now;
    } else {
        log::debug("overlay", "parent rank {}: {}; retrying in {} ms", *boot_.parent(), why,
                   std::chrono::duration_cast<std::chrono::milliseconds>(backoff_).count());
        if (now - joining_since_ >= kJoinWarnAfter && now - last_join_warning_ >= std::chrono::minutes(1)) {
            last_join_warning_ = now;
            log::warning("overlay", "not joined to parent rank {} at {} after {:.0f}s: {}", *boot_.parent(),
                         boot_.parent_uri, std::chrono::duration<double>(now - joining_since_).count(), why);
        }
    }
    reconnect_timer_.start(backoff_, [this] { connect_parent(); });
    backoff_ = std::min(std::max(backoff_ * 2, Duration(kFirstBackoff)), seconds(boot_.connect_max_backoff));
}

void Overlay::on_parent_frames(Frames&& frames) {
    auto decoded = decode(frames);
    if (!decoded) {
        log::warning("overlay", "dropped message from parent: {}", decoded.error().message);
        return;
    }
    Message& msg = *decoded;
    parent_last_seen_ = Clock::now();
    if (msg.type == MessageType::response && msg.topic == "overlay.hello" && msg.matchtag == hello_matchtag_) {
        on_hello_response(msg);
        return;
    }
    if (msg.type == MessageType::control) {
        if (msg.control_type == control::reconnect && parent_ready_) {
            parent_ready_ = false;
            cb_.on_peer_reset(*boot_.parent(), "reconnecting (it asked for a new hello)");
            connect_parent();
        } else if (msg.control_type == control::shutdown && parent_ready_) {
            // (Protocol 1 knew no status: the override build of t/fault/4008 acts so.)
            cb_.on_shutdown_request(boot_.protocol >= 2 && msg.control_status == kShutdownKeepsJobs);
        } else if (msg.control_type == control::renumber && parent_ready_) {
            cb_.on_renumber(msg.control_status);
        }
        return;
    }
    if (!parent_ready_)
        return;
    if (msg.type == MessageType::event)
        cb_.on_event(std::move(msg));
    else
        cb_.on_message(std::move(msg), *boot_.parent());
}

void Overlay::on_hello_response(const Message& msg) {
    hello_timer_.cancel();
    // ZeroMQ may deliver a hello after its attempt gave up (it reconnects
    // the old socket on its own): an answer is an answer, so the retry due
    // would only tear down a working link.
    reconnect_timer_.cancel();
    resolving_ = false;
    if (msg.errnum != 0) {
        log::error("overlay", "parent rank {} refused hello: {}", *boot_.parent(), msg.error_text());
        reconnect_parent("hello refused");
        return;
    }
    auto body = msg.json();
    std::optional<uint32_t> sequence;
    if (body && body->contains("sequence"))
        sequence = json_field(*body, "sequence", 0u).value_or(0u);
    // A parent of protocol 1 checks no protocol: this side does.
    uint32_t protocol = body ? json_field(*body, "protocol", 1u).value_or(1u) : 1u;
    if (!protocols_interoperate(protocol, boot_.protocol)) {
        log::error("overlay",
                   "parent rank {} speaks overlay protocol {} and this rank {} protocol {}: brokers more than "
                   "one version apart do not interoperate (upgrade one version at a time)",
                   *boot_.parent(), protocol, boot_.rank, boot_.protocol);
        reconnect_parent("protocols do not interoperate");
        return;
    }
    parent_ready_ = true;
    parent_protocol_ = protocol;
    // What this broker's children are told at their hello: a broker that
    // started again would tell them 0, and they would take it for a rank 0
    // that numbers anew and deliver again what they had.
    if (sequence)
        last_event_sequence_ = sequence;
    backoff_ = Duration::zero();
    log::info("overlay", "joined parent rank {} at {}", *boot_.parent(), boot_.parent_uri);
    last_report_.reset();
    send_health_report();
    cb_.on_parent_ready(sequence);
}

Result<void> Overlay::send_to_parent(const Message& msg) {
    if (!boot_.parent())
        return make_error(EHOSTUNREACH, "rank 0 has no parent");
    if (!parent_ready_ || !dealer_)
        return make_error(EHOSTUNREACH, fmt::format("parent rank {} is not connected", *boot_.parent()));
    auto r = send_frames(*dealer_, encode(msg));
    dealer_reader_->poke();
    return r;
}

void Overlay::say_goodbye() {
    if (!dealer_ || !parent_ready_)
        return;
    dealer_->set(zmq::sockopt::linger, 1000);  // deliver it before the socket closes
    (void)send_frames(*dealer_, encode(Message::control(control::goodbye, 0)));
    parent_ready_ = false;
}

// --- liveness and health -----------------------------------------------------

void Overlay::on_tick() {
    auto now = Clock::now();
    for (auto& [rank, child] : children_) {
        if (child.state != PeerState::online && child.state != PeerState::torpid)
            continue;
        double silent = std::chrono::duration<double>(now - child.last_seen).count();
        if (silent >= boot_.lost_timeout)
            set_child_state(rank, PeerState::lost, fmt::format("silent for {:.1f}s", silent));
        else if (silent >= boot_.torpid_timeout && child.state == PeerState::online)
            set_child_state(rank, PeerState::torpid, "silent");
    }
    if (parent_ready_ && std::chrono::duration<double>(now - parent_last_seen_).count() >= boot_.lost_timeout)
        reconnect_parent("parent silent");
}

void Overlay::send_heartbeats() {
    Message beat = Message::control(control::heartbeat, 0);
    if (parent_ready_)
        (void)send_to_parent(beat);
    for (auto& [rank, child] : children_)
        if (child.state == PeerState::online || child.state == PeerState::torpid)
            (void)send_to_child(rank, beat);
}

void Overlay::subtree_changed() {
    schedule_health_report();
    cb_.on_subtree_change();
}

void Overlay::schedule_health_report() {
    if (!boot_.parent() || health_timer_.active())
        return;
    health_timer_.start(kHealthDelay, [this] { send_health_report(); });
}

void Overlay::send_health_report() {
    if (!parent_ready_)
        return;
    SubtreeStates states = subtree();
    if (last_report_ && *last_report_ == states)
        return;
    Message report = Message::request("overlay.health", states.to_json(), *boot_.parent());
    report.flags |= msgflag::noresponse;
    report.routed = true;
    if (send_to_parent(report))
        last_report_ = std::move(states);
}

SubtreeStates Overlay::subtree() const {
    SubtreeStates s;
    s.online.insert(boot_.rank);
    TreeShape tree = boot_.tree();
    for (const auto& [rank, child] : children_) {
        bool up = child.state == PeerState::online || child.state == PeerState::torpid;
        if (up && child.report) {
            s.online = s.online.union_with(child.report->online);
            s.torpid = s.torpid.union_with(child.report->torpid);
            s.lost = s.lost.union_with(child.report->lost);
            s.offline = s.offline.union_with(child.report->offline);
        }
        IdSet below;
        if (!up || !child.report)
            for (uint32_t d : tree.descendants(rank))
                below.insert(d);
        IdSet* self = &s.online;
        IdSet* rest = &s.offline;  // not reported yet: unknown, shown offline
        if (child.state == PeerState::torpid)
            self = &s.torpid;
        if (child.state == PeerState::lost)
            self = rest = &s.lost;
        if (child.state == PeerState::offline)
            self = rest = &s.offline;
        s.online.erase(rank);
        self->insert(rank);
        *rest = rest->union_with(below);
    }
    return s;
}

nlohmann::json Overlay::status() const {
    nlohmann::json j = subtree().to_json();
    j["rank"] = boot_.rank;
    j["size"] = boot_.size;
    j["fanout"] = boot_.fanout;
    j["hostname"] = boot_.hostname;
    return j;
}

}  // namespace banyan
