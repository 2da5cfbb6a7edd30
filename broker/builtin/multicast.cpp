#include "broker/builtin/multicast.hpp"

#include <cerrno>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "broker/broker.hpp"
#include "broker/overlay/protocol.hpp"
#include "core/json_field.hpp"
#include "core/json_parse.hpp"
#include "core/log.hpp"

namespace banyan {
namespace {

constexpr const char* kTopic = "broker.multicast";
// The first protocol whose brokers take a multicast (overlay.md §3.1).
constexpr uint32_t kMulticastProtocol = 3;
// Answers batched into one message up to about this many bytes: the
// answers of many ranks (each up to a message's payload) would otherwise
// make one message larger than any broker takes.
constexpr size_t kBatchBytes = size_t{1} << 20;
// An answer larger than this cannot go up inside a batch's message.
constexpr size_t kLargestEntry = kDefaultMaxPayload - 64;

std::string error_entry(uint32_t rank, int errnum, const std::string& errstr) {
    return nlohmann::json{{"rank", rank}, {"errnum", errnum}, {"errstr", errstr}}.dump();
}

}  // namespace

void Multicast::register_with(Broker& broker) {
    std::shared_ptr<Multicast> service(new Multicast(broker));
    broker.register_method(kTopic, true, [service](const Message& req) { service->on_request(req); });
}

Message Multicast::request(uint32_t to, const IdSet& ranks, std::string_view topic, std::string_view payload,
                           bool streaming) {
    Message req = Message::request(kTopic, nlohmann::json::object(), to);
    req.payload = fmt::format(R"({{"ranks":{},"topic":{},"payload":{}{}}})", nlohmann::json(ranks.format()).dump(),
                              nlohmann::json(topic).dump(), payload, streaming ? R"(,"streaming":true)" : "");
    return req;
}

void Multicast::on_request(const Message& req) {
    // The payload passes on as it came, unparsed here (checked for its
    // strings and brackets, and for 64 levels from the request's top): each
    // rank's service parses it. (So a jobspec in exec.run may be 62 levels
    // deep here: submit takes 48, kMaxJobspecDepth.)
    std::string_view text = req.payload ? std::string_view(*req.payload) : std::string_view("{}");
    auto parsed = parse_json_except(text, "payload");  // (`raw` points into `text`)
    if (!parsed)
        return broker_.respond_error(req, EPROTO, fmt::format("{}: {}", kTopic, parsed.error().message));
    const nlohmann::json& body = parsed->rest;
    auto ranks_text = json_field<std::string>(body, "ranks", "", kTopic);
    auto topic = json_field<std::string>(body, "topic", "", kTopic);
    auto streaming = json_field<bool>(body, "streaming", false, kTopic);
    if (auto e = first_error(ranks_text, topic, streaming))
        return broker_.respond_error(req, EPROTO, e->message);
    auto ranks = IdSet::parse(*ranks_text);
    if (!ranks || ranks->empty() || topic->empty() || *topic == kTopic || !parsed->raw || parsed->raw->front() != '{')
        return broker_.respond_error(
            req, EPROTO, "broker.multicast: expected {\"ranks\": IDSET, \"topic\": TOPIC, \"payload\": OBJECT}");
    const TreeShape tree = broker_.bootstrap().tree();
    if (ranks->last() >= tree.size())  // (never walked: a set may name 4 billion ids)
        return broker_.respond_error(
            req, EHOSTUNREACH,
            fmt::format("broker.multicast: no rank {}: the instance has ranks 0-{}", ranks->last(), tree.size() - 1));
    bool answers = req.wants_response();
    if (answers && !req.has_flag(msgflag::streaming))
        return broker_.respond_error(req, EPROTO,
                                     "broker.multicast: its answers come as a stream (send it STREAMING, or "
                                     "NORESPONSE)");
    const uint32_t me = broker_.bootstrap().rank;
    bool mine = false;
    std::map<uint32_t, IdSet> below;  // by child
    IdSet above;                      // outside this subtree: through the parent
    ranks->for_each([&](uint32_t rank) {
        if (rank == me)
            mine = true;
        else if (auto child = tree.child_toward(me, rank))
            below[*child].insert(rank);
        else
            above.insert(rank);
    });
    uint64_t relay = 0;
    if (answers) {
        relay = next_relay_++;
        Relay& r = relays_[relay];
        r.request = req;
        r.request.payload.reset();
        ranks->for_each([&](uint32_t rank) { r.waiting.insert(rank); });
    }
    // What each call needs is made first: an answer may come inside a call
    // (a service of this broker, a link that is down) and end the relay.
    std::string inner(*parsed->raw);
    auto pass_on = [&](uint32_t neighbour, uint32_t protocol, const IdSet& part) {
        if (protocol >= kMulticastProtocol)
            return ask_neighbour(relay, request(neighbour, part, *topic, inner, *streaming), part);
        // One request a rank, as a broker of protocol 2 is asked: never
        // STREAMING, which an older service's last answer would carry on
        // (as an answer before the last, and the rank's answers would
        // never end). It reports what it reported before (exec.run:
        // job-manager.started).
        part.for_each([&](uint32_t rank) { ask_one(relay, rank, *topic, inner, false); });
    };
    for (auto& [child, part] : below)
        pass_on(child, broker_.overlay().child_protocol(child), part);
    // (Only a multicast sent to a rank other than 0 has ranks above it:
    // rank 0's subtree is the instance.)
    if (auto parent = broker_.bootstrap().parent(); parent && !above.empty())
        pass_on(*parent, broker_.overlay().parent_protocol(), above);
    else if (!above.empty())
        above.for_each([&](uint32_t rank) {
            pass_up_error(relay, rank, EHOSTUNREACH, fmt::format("rank {} is not below rank {}", rank, me));
        });
    if (mine)
        ask_one(relay, me, *topic, inner, *streaming);
}

void Multicast::ask_one(uint64_t relay, uint32_t rank, const std::string& topic, const std::string& payload,
                        bool streaming) {
    Message request = Message::request(topic, nlohmann::json::object(), rank);
    request.payload = payload;
    if (relay == 0)
        return broker_.send(std::move(request));
    // Asked for: a service may then answer before its last answer
    // (exec.run: "started"), and that answer goes up with the others.
    if (streaming)
        request.flags |= msgflag::streaming;
    broker_.rpc(std::move(request), [this, relay, rank](const Message& resp) {
        if (resp.errnum)
            return pass_up_error(relay, rank, static_cast<int>(resp.errnum), resp.error_text());
        bool more = !resp.is_final_response();
        pass_up(relay, rank,
                fmt::format(R"({{"rank":{},"payload":{}{}}})", rank, resp.payload.value_or("{}"),
                            more ? R"(,"more":true)" : ""),
                more);
    });
}

void Multicast::ask_neighbour(uint64_t relay, Message request, const IdSet& part) {
    if (relay == 0)
        return broker_.send(std::move(request));
    request.flags |= msgflag::streaming;
    broker_.rpc(std::move(request),
                [this, relay, part](const Message& resp) { on_neighbour_answer(relay, part, resp); });
}

// A neighbour's stream (a child's, or the parent's for the ranks above):
// its part's answers, passed up as they come; its end (ENODATA), or an
// error that ends it (the neighbour lost), answers every rank of its part
// still waiting.
void Multicast::on_neighbour_answer(uint64_t relay, const IdSet& part, const Message& resp) {
    if (resp.errnum == 0) {
        auto body = resp.json();
        auto answers =
            body ? json_field<nlohmann::json>(*body, "answers", nlohmann::json::array(), kTopic) : body.error();
        if (!answers || !answers->is_array()) {
            log::warning("router", "broker.multicast: a malformed answer from a neighbour: {}",
                         answers ? "answers: expected an array" : answers.error().message);
            if (!resp.is_final_response())
                return;
        }
        for (const auto& entry : answers && answers->is_array() ? *answers : nlohmann::json::array()) {
            auto rank = json_field<uint32_t>(entry, "rank", 0, "broker.multicast.answers[]");
            auto more = json_field<bool>(entry, "more", false, "broker.multicast.answers[]");
            if (!rank || !more || !entry.contains("rank") || !part.contains(*rank)) {
                log::warning("router",
                             "broker.multicast: an answer from a neighbour that names no rank it was sent: {}",
                             entry.dump());
                continue;
            }
            pass_up(relay, *rank, entry.dump(), *more);
        }
        if (!resp.is_final_response())
            return;
    }
    // The neighbour's stream ended (ENODATA, or a last answer it should
    // not have sent, malformed or not), or an error ended it (it is lost).
    bool ended = resp.errnum == 0 || resp.errnum == ENODATA;
    std::string why = ended ? "its answer was not passed on" : resp.error_text();
    int errnum = ended ? EPROTO : static_cast<int>(resp.errnum);
    part.for_each([&](uint32_t rank) {
        auto r = relays_.find(relay);
        if (r != relays_.end() && r->second.waiting.count(rank))
            pass_up_error(relay, rank, errnum, why);
    });
}

void Multicast::pass_up(uint64_t relay, uint32_t rank, std::string entry, bool more) {
    auto r = relays_.find(relay);
    if (r == relays_.end() || !r->second.waiting.count(rank))
        return;  // answered already
    if (entry.size() > kLargestEntry) {  // (its rank's last: what it says after is not passed)
        entry = error_entry(
            rank, EMSGSIZE,
            fmt::format("its answer ({} bytes) is too large to pass on in a multicast's stream", entry.size()));
        more = false;
    }
    if (!more)
        r->second.waiting.erase(rank);
    r->second.batch.push_back(std::move(entry));
    if (r->second.batch.size() == 1)
        broker_.reactor().post([this, relay] { flush(relay); });
}

// Answers that come together (the shares of a job that end at once, a
// lost link's ranks) go up as one message: each crosses d levels (§11).
void Multicast::flush(uint64_t relay) {
    auto r = relays_.find(relay);
    // An answer taken by a service of this broker (rank 0's job manager)
    // is handled inside respond(), and what that does may answer more
    // ranks here (an exception ends the job's other shares): sent too
    // before the stream ends.
    while (r != relays_.end() && !r->second.batch.empty()) {
        std::string payload = R"({"answers":[)";
        size_t taken = 0;
        for (auto& entry : r->second.batch) {
            if (taken > 0 && payload.size() + entry.size() + 2 > kBatchBytes)
                break;  // the rest in the next message
            payload += (taken++ ? "," : "") + entry;
        }
        payload += "]}";
        r->second.batch.erase(r->second.batch.begin(), r->second.batch.begin() + static_cast<std::ptrdiff_t>(taken));
        Message answer = Message::response_to(r->second.request, nlohmann::json::object());
        answer.flags |= msgflag::streaming;
        answer.payload = std::move(payload);
        broker_.respond(std::move(answer));
        r = relays_.find(relay);
    }
    if (r == relays_.end() || !r->second.waiting.empty())
        return;
    Message request = std::move(r->second.request);
    relays_.erase(r);
    broker_.respond_error(request, ENODATA, "");
}

void Multicast::pass_up_error(uint64_t relay, uint32_t rank, int errnum, const std::string& errstr) {
    if (relay != 0)
        pass_up(relay, rank, error_entry(rank, errnum, errstr));
}

}  // namespace banyan
