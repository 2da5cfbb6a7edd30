#include "broker/broker.hpp"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include <fmt/format.h>

#include "core/idset.hpp"
#include "core/json_field.hpp"
#include "core/log.hpp"

namespace banyan {
namespace {

// Answers kept for a parent that is away, at most.
constexpr size_t kMaxAnswersForParent = 10'000;
constexpr size_t kMaxAnswerBytesForParent = size_t{64} << 20;

std::string_view service_of(std::string_view topic) {
    return topic.substr(0, topic.find('.'));
}

// Identifies a forwarded request by its route and matchtag.
std::string pending_key(const Message& msg) {
    std::string key;
    for (const auto& hop : msg.route) {
        key += hop;
        key += '/';
    }
    return key + std::to_string(msg.matchtag);
}

// access.admins: user names or uids who act as the instance owner. A
// name unknown here is an error: a typo must not quietly take the rights
// away (or give them to whoever gets that name later).
Result<std::set<uint32_t>> admin_uids(const Config& config) {
    auto names = config.get_string_array("access.admins", std::vector<std::string>{});
    if (!names)
        return names.error();
    std::set<uint32_t> uids;
    for (const auto& name : *names) {
        if (const passwd* pw = getpwnam(name.c_str())) {
            uids.insert(pw->pw_uid);
            continue;
        }
        auto uid = parse_decimal(name, UINT32_MAX - 1, "access.admins");
        if (!uid)
            return make_error(EINVAL, fmt::format("access.admins: {}: no such user", name));
        uids.insert(static_cast<uint32_t>(*uid));
    }
    return uids;
}

}  // namespace

Broker::Broker(Reactor& reactor, Bootstrap bootstrap)
    : reactor_(reactor), boot_(std::move(bootstrap)), replay_timer_(reactor), shutdown_timer_(reactor) {
    std::random_device random;
    incarnation_hop_ = fmt::format("i{:08x}{:08x}", random(), random());
}

Broker::~Broker() = default;

Result<void> Broker::start() {
    overlay_ = std::make_unique<Overlay>(
        reactor_, boot_,
        OverlayCallbacks{
            .on_message = [this](Message&& m, uint32_t from) { on_peer_message(std::move(m), from); },
            .on_event = [this](Message&& e) { on_event_from_parent(std::move(e)); },
            .on_peer_reset = [this](uint32_t rank, std::string_view why) { on_peer_reset(rank, why); },
            .on_parent_ready =
                [this](std::optional<uint32_t> sequence) {
                    if (!sequence) {
                        // (A parent that started again knows none yet: the
                        // events it passes on tell.)
                    } else if (!event_sequence_known_) {
                        event_sequence_ = *sequence;
                        event_sequence_known_ = true;
                    } else if (*sequence < event_sequence_) {
                        renumber_events(*sequence);  // rank 0 started again
                    } else if (*sequence > event_sequence_ && !replaying_) {
                        // Published while this broker was cut off.
                        log::warning("router", "event gap: the parent is at sequence {}, this broker at {}", *sequence,
                                     event_sequence_);
                        replay_events(event_sequence_ + 1, *sequence);
                    }
                    send_answers_for_parent();
                    check_ready();
                },
            .on_shutdown_request = [this](bool keep_jobs) { begin_shutdown("parent is shutting down", keep_jobs); },
            .on_renumber = [this](uint32_t sequence) { renumber_events(sequence); },
            .on_subtree_change = [this] { on_subtree_change(); },
        });
    auto per_user = boot_.config.get_int("broker.connections-per-user", 1, 1'000'000, 256);
    if (!per_user)
        return per_user.error();
    auto admins = admin_uids(boot_.config);
    if (!admins)
        return admins.error();
    connector_ = std::make_unique<LocalConnector>(
        reactor_, boot_.rundir + "/local.sock", getuid(), std::move(*admins), static_cast<size_t>(*per_user),
        LocalConnector::Callbacks{
            .on_request = [this](Message&& m, const std::string& id) { on_local_request(std::move(m), id); },
            .on_disconnect = [](const std::string&) {},
        });
    if (auto r = connector_->start(); !r)
        return r;
    if (auto r = overlay_->start(); !r)
        return r;
    if (boot_.rank == 0)
        event_sequence_known_ = true;
    check_ready();
    return {};
}

void Broker::register_method(std::string topic, bool owner_only, Handler handler) {
    services_.insert(std::string(service_of(topic)));
    methods_[std::move(topic)] = Method{owner_only, std::move(handler)};
}

double Broker::uptime() const {
    return std::chrono::duration<double>(Clock::now() - started_).count();
}

size_t Broker::online_count() const {
    return overlay_->subtree().online.count();
}

// --- requests ----------------------------------------------------------------

void Broker::on_local_request(Message&& msg, const std::string& connection) {
    msg.push_route(connection);
    route_request(std::move(msg));
}

void Broker::on_peer_message(Message&& msg, uint32_t from) {
    if (msg.type == MessageType::request) {
        msg.push_route(std::to_string(from));
        route_request(std::move(msg));
        return;
    }
    if (msg.type != MessageType::response)
        return;
    auto peer = pending_.find(from);
    if (peer != pending_.end() && msg.is_final_response())
        peer->second.erase(pending_key(msg));
    respond(std::move(msg));
}

void Broker::route_request(Message msg) {
    const uint32_t rank = boot_.rank;
    std::string_view service = service_of(msg.topic);
    bool upstream = msg.has_flag(msgflag::upstream) && msg.nodeid == rank;
    if (msg.nodeid == kNodeIdAny || upstream) {
        if (!upstream && services_.count(service)) {
            deliver_local(msg);
        } else if (auto parent = boot_.parent()) {
            msg.nodeid = kNodeIdAny;  // past its origin an upstream request is an "any" request
            msg.flags &= ~msgflag::upstream;
            forward(*parent, std::move(msg));
        } else {
            respond_error(msg, ENOSYS, fmt::format("no service '{}'", service));
        }
        return;
    }
    if (msg.nodeid == rank) {
        if (services_.count(service))
            deliver_local(msg);
        else
            respond_error(msg, ENOSYS, fmt::format("no service '{}' on rank {}", service, rank));
        return;
    }
    if (msg.nodeid >= boot_.size) {
        respond_error(msg, EHOSTUNREACH,
                      fmt::format("no rank {}: the instance has ranks 0-{}", msg.nodeid, boot_.size - 1));
        return;
    }
    if (auto child = boot_.tree().child_toward(rank, msg.nodeid))
        forward(*child, std::move(msg));
    else
        forward(*boot_.parent(), std::move(msg));
}

void Broker::forward_to(uint32_t rank, const Message& req) {
    Message msg = req;
    msg.nodeid = rank;
    msg.flags &= ~msgflag::upstream;
    route_request(std::move(msg));
}

Broker::Handler Broker::at_rank0(Handler handle) {
    return [this, handle = std::move(handle)](const Message& req) {
        if (boot_.rank != 0)
            return forward_to(0, req);
        handle(req);
    };
}

uint32_t Broker::rpc(Message request, std::function<void(const Message&)> on_response) {
    return rpc_as(getuid(), role::owner, std::move(request), std::move(on_response));
}

uint32_t Broker::rpc_as(uint32_t userid, uint32_t rolemask, Message request,
                        std::function<void(const Message&)> on_response) {
    request.routed = true;
    request.route = {incarnation_hop_};
    request.rolemask = rolemask;
    request.userid = userid;
    if (next_internal_matchtag_ == 0)
        next_internal_matchtag_ = 1;  // 0 is send()'s
    uint32_t matchtag = request.matchtag = next_internal_matchtag_++;
    internal_rpcs_[request.matchtag] = std::move(on_response);
    route_request(std::move(request));
    return matchtag;
}

void Broker::send(Message request) {
    request.routed = true;
    request.route = {incarnation_hop_};
    request.rolemask = role::owner;
    request.userid = getuid();
    request.flags |= msgflag::noresponse;
    request.matchtag = 0;  // an older service answers all the same: no rpc of ours has matchtag 0
    route_request(std::move(request));
}

void Broker::add_ready_condition(std::function<bool()> condition) {
    ready_conditions_.push_back(std::move(condition));
}

void Broker::deliver_local(const Message& msg) {
    auto it = methods_.find(msg.topic);
    if (it == methods_.end()) {
        respond_error(msg, ENOSYS, fmt::format("no method '{}' on rank {}", msg.topic, boot_.rank));
        return;
    }
    if (it->second.owner_only && !(msg.rolemask & role::owner)) {
        respond_error(msg, EPERM, fmt::format("{}: only the instance owner may do this", msg.topic));
        return;
    }
    auto handler = it->second.handler;  // the handler may register methods
    try {
        handler(msg);
    } catch (const std::exception& e) {
        // A handler bug or a payload it did not expect must not take the
        // broker (and every job on it) down: answer and log instead.
        log::error("router", "{} from uid {} failed: {}", msg.topic, msg.userid, e.what());
        respond_error(msg, EPROTO, fmt::format("{}: cannot handle this request: {}", msg.topic, e.what()));
    }
}

void Broker::forward(uint32_t peer, Message msg) {
    msg.routed = true;
    auto sent = peer == boot_.parent() ? overlay_->send_to_parent(msg) : overlay_->send_to_child(peer, msg);
    if (!sent) {
        if (!msg.wants_response())
            return log::info("router", "dropped {} for rank {} (it wants no answer): {}", msg.topic, msg.nodeid,
                             sent.error().message);
        respond_error(msg, EHOSTUNREACH, sent.error().message);
        return;
    }
    if (msg.wants_response()) {
        // Sent: keep the request, less its payload, to answer it if the peer is lost.
        std::string key = pending_key(msg);
        msg.payload.reset();
        pending_[peer][key] = Pending{std::move(msg), next_pending_order_++};
    }
}

void Broker::on_peer_reset(uint32_t rank, std::string_view why) {
    auto it = pending_.find(rank);
    if (it == pending_.end())
        return;
    auto lost = std::move(it->second);
    pending_.erase(it);
    // In the order they were sent: a client that keeps what failed (the
    // exec service's output) sends it again in that order.
    std::vector<Pending*> in_order;
    for (auto& [key, p] : lost)
        in_order.push_back(&p);
    std::sort(in_order.begin(), in_order.end(), [](const Pending* a, const Pending* b) { return a->order < b->order; });
    for (Pending* p : in_order)
        respond_error(p->request, EHOSTUNREACH, fmt::format("rank {} is {}", rank, why));
}

// --- responses ---------------------------------------------------------------

void Broker::respond(Message msg) {
    std::string hop = msg.pop_route();
    if (hop.empty() || hop[0] == 'i') {
        // The broker's own request (Broker::rpc), if of this process: its
        // matchtags started again at 1 after a restart.
        if (hop != incarnation_hop_) {
            log::info("router", "dropped an answer ({}) to a request of an earlier process of rank {}", msg.topic,
                      boot_.rank);
            return;
        }
        auto it = internal_rpcs_.find(msg.matchtag);
        if (it != internal_rpcs_.end() && msg.type == MessageType::response) {
            auto fn = std::move(it->second);
            if (msg.is_final_response())
                internal_rpcs_.erase(it);
            else
                it->second = fn;
            fn(msg);
        }
        return;
    }
    if (LocalConnector::is_connection_id(hop)) {
        connector_->send(hop, msg);
        return;
    }
    auto rank = parse_decimal(hop, IdSet::kMaxId, "route");
    if (!rank) {
        log::warning("router", "dropped response {}: bad route hop '{}'", msg.topic, hop);
        return;
    }
    auto peer = static_cast<uint32_t>(*rank);
    if (peer == boot_.parent() && (!overlay_->parent_ready() || !answers_for_parent_.empty())) {
        // Kept, bounded: an exec service's answer for a job that ended while
        // this rank was cut off is all rank 0 hears of that end.
        size_t bytes = msg.payload ? msg.payload->size() : 0;
        if (answers_for_parent_.size() >= kMaxAnswersForParent ||
            answers_for_parent_bytes_ + bytes > kMaxAnswerBytesForParent)
            return log::warning("router", "dropped response {} for the parent: {} answers wait for it already",
                                msg.topic, answers_for_parent_.size());
        answers_for_parent_bytes_ += bytes;
        answers_for_parent_.push_back(std::move(msg));
        return;
    }
    auto sent = peer == boot_.parent() ? overlay_->send_to_parent(msg) : overlay_->send_to_child(peer, msg);
    if (!sent)
        log::debug("router", "dropped response {} to rank {}: {}", msg.topic, peer, sent.error().message);
}

void Broker::send_answers_for_parent() {
    while (!answers_for_parent_.empty() && overlay_->parent_ready()) {
        Message& msg = answers_for_parent_.front();
        if (auto sent = overlay_->send_to_parent(msg); !sent)
            return log::debug("router", "answers for the parent wait: {}", sent.error().message);
        answers_for_parent_bytes_ -= msg.payload ? msg.payload->size() : 0;
        answers_for_parent_.pop_front();
    }
}

void Broker::respond_error(const Message& request, int errnum, std::string_view errstr) {
    if (request.wants_response())
        respond(Message::error_to(request, errnum, errstr));
}

// --- events ------------------------------------------------------------------

namespace {

constexpr size_t kKeptEvents = 1024;

}  // namespace

void Broker::publish_event(std::string topic, const nlohmann::json& payload, bool private_event, uint32_t userid) {
    Message event = Message::event(std::move(topic), payload.empty() ? nlohmann::json() : payload);
    event.sequence = ++event_sequence_;
    event.userid = userid;
    if (private_event)
        event.flags |= msgflag::private_event;
    distribute_event(event);
    event_log_.push_back(std::move(event));
    if (event_log_.size() > kKeptEvents)
        event_log_.pop_front();
}

Result<nlohmann::json> Broker::kept_events(uint32_t from, uint32_t to) const {
    if (event_log_.empty() || event_log_.front().sequence > from || event_log_.back().sequence < to)
        return make_error(
            ENOENT, fmt::format("events {} to {} are not all kept (rank 0 keeps the last {})", from, to, kKeptEvents));
    nlohmann::json events = nlohmann::json::array();
    for (const Message& e : event_log_) {
        if (e.sequence < from || e.sequence > to)
            continue;
        auto payload = e.payload ? e.json() : Result<nlohmann::json>(nlohmann::json());
        events.push_back({{"sequence", e.sequence},
                          {"topic", e.topic},
                          {"userid", e.userid},
                          {"private", (e.flags & msgflag::private_event) != 0},
                          {"payload", payload ? std::move(*payload) : nlohmann::json()}});
    }
    return nlohmann::json{{"events", std::move(events)}};
}

void Broker::on_event_from_parent(Message&& event) {
    if (replaying_) {
        held_events_.push_back(std::move(event));
        return;
    }
    if (event_sequence_known_ && event.sequence <= event_sequence_)
        return;  // replayed already
    if (event_sequence_known_ && event.sequence != event_sequence_ + 1) {
        log::warning("router", "event gap: got sequence {} after {} ({})", event.sequence, event_sequence_,
                     event.topic);
        uint32_t to = event.sequence - 1;
        held_events_.push_back(std::move(event));
        return replay_events(event_sequence_ + 1, to);
    }
    event_sequence_ = event.sequence;
    event_sequence_known_ = true;
    distribute_event(event);
}

// Rank 0 started again and numbers events from `sequence` + 1: what was
// held or asked for under the old numbers is moot. The children are told
// (overlay.md §8): a child's own parent has not changed, so no hello
// tells it, and it would drop the new events as duplicates until their
// numbers passed its own.
void Broker::renumber_events(uint32_t sequence) {
    event_sequence_ = sequence;
    event_sequence_known_ = true;
    held_events_.clear();
    if (replaying_) {
        replay_timer_.cancel();
        internal_rpcs_.erase(replay_matchtag_);
        replaying_ = false;
    }
    overlay_->send_renumber_to_children(sequence);
}

// Asks rank 0 for the events this broker missed; delivers them in order,
// then those that came meanwhile (held until then). Unanswered within
// tbon.replay_timeout (a request lost on the way, a rank 0 stuck), or
// failed beyond a parent that stays (its own link to rank 0 dropped), it
// is asked again then. (rpc() may answer before it returns: the timer is
// set first.)
void Broker::replay_events(uint32_t from, uint32_t to) {
    replaying_ = true;
    auto seconds = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(boot_.replay_timeout));
    replay_timer_.start(seconds, [this, from, to] {
        log::warning("router", "event.replay of events {} to {}: no answer from rank 0 within {}s; asking again", from,
                     to, boot_.replay_timeout);
        internal_rpcs_.erase(replay_matchtag_);  // a late answer is dropped
        replay_events(from, to);
    });
    auto on_answer = [this, from, to, seconds](const Message& resp) {
        replay_timer_.cancel();
        if (resp.errnum == EHOSTUNREACH && overlay_->parent_ready()) {
            replay_timer_.start(seconds, [this, from, to] { replay_events(from, to); });
            return;  // still replaying: what comes meanwhile is held
        }
        replaying_ = false;
        if (resp.errnum == EHOSTUNREACH)
            return;  // the parent is gone: asked again once this broker has joined one (on_parent_ready)
        auto body = resp.errnum ? Result<nlohmann::json>(make_error(static_cast<int>(resp.errnum), resp.error_text()))
                                : resp.json();
        auto events = body ? json_field<nlohmann::json>(*body, "events", nlohmann::json::array(), "event.replay")
                           : Result<nlohmann::json>(body.error());
        if (!events || !events->is_array()) {
            log::error("router", "events {} to {} are lost: {}", from, to,
                       events ? "event.replay: expected a list" : events.error().message);
        } else {
            for (const auto& e : *events) {
                auto sequence = json_field<uint32_t>(e, "sequence", 0, "event.replay");
                auto topic = json_field<std::string>(e, "topic", "", "event.replay");
                auto userid = json_field<uint32_t>(e, "userid", 0, "event.replay");
                auto is_private = json_field<bool>(e, "private", false, "event.replay");
                if (first_error(sequence, topic, userid, is_private) || *sequence <= event_sequence_)
                    continue;
                Message event = Message::event(*topic, e.contains("payload") ? e["payload"] : nlohmann::json());
                event.sequence = *sequence;
                event.userid = *userid;
                if (*is_private)
                    event.flags |= msgflag::private_event;
                event_sequence_ = *sequence;
                distribute_event(event);
            }
            log::info("router", "resynchronised: events {} to {} replayed", from, to);
        }
        event_sequence_ = std::max(event_sequence_, to);
        for (auto& held : std::exchange(held_events_, {}))
            on_event_from_parent(std::move(held));
    };
    replay_matchtag_ = rpc(Message::request("event.replay", {{"from", from}, {"to", to}}, 0), std::move(on_answer));
}

void Broker::distribute_event(const Message& event) {
    overlay_->send_event_to_children(event);
    connector_->deliver_event(event);
}

// --- lifecycle ---------------------------------------------------------------

void Broker::when_running(std::function<void()> fn) {
    if (state_ == State::run)
        fn();
    else
        running_waiters_.push_back(std::move(fn));
}

void Broker::check_ready() {
    if (state_ != State::join)
        return;
    bool ready = boot_.rank == 0 ? online_count() >= boot_.quorum : overlay_->parent_ready();
    for (const auto& condition : ready_conditions_)
        ready = ready && (boot_.rank != 0 || condition());
    if (!ready)
        return;
    state_ = State::run;
    if (boot_.rank == 0)
        log::info("broker", "quorum reached: {} of {} ranks online after {:.3f}s", online_count(), boot_.size,
                  uptime());
    auto waiters = std::move(running_waiters_);
    for (auto& fn : waiters)
        fn();
}

void Broker::add_subtree_listener(std::function<void()> fn) {
    subtree_listeners_.push_back(std::move(fn));
}

void Broker::on_subtree_change() {
    for (const auto& fn : subtree_listeners_)
        fn();
    check_ready();
    if (state_ == State::shutdown && overlay_->children_up() == 0)
        finish_shutdown();
}

void Broker::begin_shutdown(std::string_view why, bool keep_jobs) {
    if (state_ == State::shutdown)
        return;
    log::info("broker", "shutting down{}: {}", keep_jobs ? ", keeping the jobs" : "", why);
    state_ = State::shutdown;
    keep_jobs_ = keep_jobs;
    notify_shutdown();
    overlay_->send_shutdown_to_children(keep_jobs);
    if (overlay_->children_up() == 0) {
        reactor_.post([this] { finish_shutdown(); });
        return;
    }
    shutdown_timer_.start(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(boot_.shutdown_timeout)),
                          [this] {
                              log::warning("broker", "{} children did not leave within {}s; leaving anyway",
                                           overlay_->children_up(), boot_.shutdown_timeout);
                              finish_shutdown();
                          });
}

void Broker::when_shutting_down(std::function<void()> fn) {
    shutdown_waiters_.push_back(std::move(fn));
}

void Broker::notify_shutdown() {
    auto waiters = std::move(shutdown_waiters_);
    for (auto& fn : waiters)
        fn();
}

void Broker::leave(bool keep_jobs) {
    log::info("broker", "leaving the instance{}", keep_jobs ? "; its jobs' shells wait to be re-attached" : "");
    state_ = State::shutdown;
    keep_jobs_ = keep_jobs;
    notify_shutdown();
    finish_shutdown();
}

void Broker::finish_shutdown() {
    if (finished_)
        return;
    finished_ = true;
    shutdown_timer_.cancel();
    overlay_->say_goodbye();
    reactor_.stop();
}

}  // namespace banyan
