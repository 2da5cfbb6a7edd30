#include "core/message.hpp"

#include <cstring>

#include <fmt/format.h>

#include "core/json_parse.hpp"

namespace banyan {
namespace {

constexpr uint8_t kMagic = 0x8e;
constexpr uint8_t kVersion = 1;
constexpr uint8_t kReservedFlags = 0x80;
constexpr size_t kStreamOverhead = 64u << 10;

void put_u32(std::string& out, uint32_t v) {
    const char bytes[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                           static_cast<char>(v)};
    out.append(bytes, 4);
}

uint32_t get_u32(const char* p) {
    const auto* b = reinterpret_cast<const unsigned char*>(p);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

Error bad(std::string what) {
    return make_error(EPROTO, "malformed message: " + std::move(what));
}

bool valid_type(uint8_t t) {
    return t == 1 || t == 2 || t == 4 || t == 8;
}

// Which caller flags each type may carry (spec section 3).
uint8_t allowed_flags(MessageType type) {
    using namespace msgflag;
    switch (type) {
        case MessageType::request:
            return topic | payload | noresponse | route | upstream | streaming;
        case MessageType::response:
            return topic | payload | route | streaming;
        case MessageType::event:
            return topic | payload | private_event;
        case MessageType::control:
            return route;
    }
    return 0;
}

bool valid_topic(std::string_view topic) {
    if (topic.empty() || topic.size() > kMaxTopic)
        return false;
    for (char c : topic)
        if (c < 0x21 || c > 0x7e)
            return false;
    return true;
}

std::string dump_compact(const nlohmann::json& body) {
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<std::string> payload_text(const nlohmann::json& body) {
    if (body.is_null())
        return std::nullopt;
    return dump_compact(body);
}

// Fills the message's fields from a header frame that has the right size.
Result<void> read_header(const std::string& h, Message& msg) {
    const auto* b = reinterpret_cast<const unsigned char*>(h.data());
    if (b[0] != kMagic)
        return bad(fmt::format("bad magic 0x{:02x}", b[0]));
    if (b[1] != kVersion)
        return bad(fmt::format("unsupported version {}", b[1]));
    if (!valid_type(b[2]))
        return bad(fmt::format("unknown type {}", b[2]));
    msg.type = static_cast<MessageType>(b[2]);
    uint8_t flags = b[3];
    if ((flags & kReservedFlags) || (flags & ~allowed_flags(msg.type)))
        return bad(fmt::format("flags 0x{:02x} not allowed on a {}", flags, to_string(msg.type)));
    bool needs_topic = msg.type != MessageType::control;
    if (needs_topic != ((flags & msgflag::topic) != 0))
        return bad(fmt::format("a {} {} a topic", to_string(msg.type), needs_topic ? "needs" : "may not have"));
    msg.flags = flags & ~(msgflag::topic | msgflag::payload | msgflag::route);
    msg.userid = get_u32(h.data() + 4);
    msg.rolemask = get_u32(h.data() + 8);
    uint32_t aux1 = get_u32(h.data() + 12);
    uint32_t aux2 = get_u32(h.data() + 16);
    switch (msg.type) {
        case MessageType::request:
            msg.nodeid = aux1;
            msg.matchtag = aux2;
            break;
        case MessageType::response:
            msg.errnum = aux1;
            msg.matchtag = aux2;
            break;
        case MessageType::event:
            if (aux2 != 0)
                return bad("event header word aux2 must be 0");
            msg.sequence = aux1;
            break;
        case MessageType::control:
            msg.control_type = aux1;
            msg.control_status = aux2;
            break;
    }
    return {};
}

}  // namespace

Message Message::request(std::string topic, const nlohmann::json& body, uint32_t nodeid) {
    Message msg;
    msg.type = MessageType::request;
    msg.topic = std::move(topic);
    msg.payload = payload_text(body);
    msg.nodeid = nodeid;
    return msg;
}

Message Message::response_to(const Message& req, const nlohmann::json& body) {
    Message msg;
    msg.type = MessageType::response;
    msg.flags = req.flags & msgflag::streaming;
    msg.userid = req.userid;
    msg.rolemask = req.rolemask;
    msg.matchtag = req.matchtag;
    msg.routed = req.routed;
    msg.route = req.route;
    msg.topic = req.topic;
    msg.payload = payload_text(body);
    return msg;
}

Message Message::error_to(const Message& req, int errnum, std::string_view errstr) {
    Message msg = response_to(req, nullptr);
    msg.errnum = static_cast<uint32_t>(errnum);
    if (!errstr.empty())
        msg.payload = dump_compact(nlohmann::json{{"errstr", errstr}});
    return msg;
}

Message Message::event(std::string topic, const nlohmann::json& body) {
    Message msg;
    msg.type = MessageType::event;
    msg.topic = std::move(topic);
    msg.payload = payload_text(body);
    return msg;
}

Message Message::control(uint32_t control_type, uint32_t status) {
    Message msg;
    msg.type = MessageType::control;
    msg.control_type = control_type;
    msg.control_status = status;
    return msg;
}

Result<nlohmann::json> Message::json() const {
    if (!payload)
        return nlohmann::json::object();
    auto body = parse_json(*payload);
    if (!body)
        return bad("payload: " + body.error().message);
    if (!body->is_object())
        return bad("payload is not a JSON object");
    return body;
}

std::string Message::error_text() const {
    if (payload) {
        auto body = parse_json(*payload);
        if (body && body->is_object() && body->contains("errstr") && (*body)["errstr"].is_string())
            return (*body)["errstr"].get<std::string>();
    }
    return std::strerror(static_cast<int>(errnum));
}

void Message::push_route(std::string hop) {
    routed = true;
    route.insert(route.begin(), std::move(hop));
}

std::string Message::pop_route() {
    if (route.empty())
        return {};
    std::string hop = std::move(route.front());
    route.erase(route.begin());
    return hop;
}

Frames encode(const Message& msg) {
    Frames frames;
    frames.reserve(msg.route.size() + 4);
    uint8_t flags = msg.flags;
    if (msg.routed) {
        flags |= msgflag::route;
        frames.insert(frames.end(), msg.route.begin(), msg.route.end());
        frames.emplace_back();
    }
    if (msg.type != MessageType::control) {
        flags |= msgflag::topic;
        frames.push_back(msg.topic);
    }
    if (msg.payload) {
        flags |= msgflag::payload;
        frames.push_back(*msg.payload);
    }
    uint32_t aux1 = 0;
    uint32_t aux2 = 0;
    switch (msg.type) {
        case MessageType::request:
            aux1 = msg.nodeid;
            aux2 = msg.matchtag;
            break;
        case MessageType::response:
            aux1 = msg.errnum;
            aux2 = msg.matchtag;
            break;
        case MessageType::event:
            aux1 = msg.sequence;
            break;
        case MessageType::control:
            aux1 = msg.control_type;
            aux2 = msg.control_status;
            break;
    }
    std::string header;
    header.reserve(kHeaderSize);
    header.push_back(static_cast<char>(kMagic));
    header.push_back(static_cast<char>(kVersion));
    header.push_back(static_cast<char>(msg.type));
    header.push_back(static_cast<char>(flags));
    put_u32(header, msg.userid);
    put_u32(header, msg.rolemask);
    put_u32(header, aux1);
    put_u32(header, aux2);
    frames.push_back(std::move(header));
    return frames;
}

Result<Message> decode(const Frames& frames, const DecodeLimits& limits) {
    if (frames.empty())
        return bad("no frames");
    if (frames.size() > kMaxFrames)
        return bad(fmt::format("{} frames (at most {})", frames.size(), kMaxFrames));
    const std::string& header = frames.back();
    if (header.size() != kHeaderSize)
        return bad(fmt::format("header is {} bytes (expected {})", header.size(), kHeaderSize));
    Message msg;
    if (auto r = read_header(header, msg); !r)
        return r.error();
    uint8_t flags = static_cast<uint8_t>(header[3]);

    size_t next = 0;
    const size_t body_end = frames.size() - 1;
    if (flags & msgflag::route) {
        msg.routed = true;
        while (next < body_end && !frames[next].empty()) {
            if (frames[next].size() > kMaxRouteFrame)
                return bad(fmt::format("route frame of {} bytes (at most {})", frames[next].size(), kMaxRouteFrame));
            if (msg.route.size() == kMaxRouteDepth)
                return bad(fmt::format("route deeper than {} hops", kMaxRouteDepth));
            msg.route.push_back(frames[next++]);
        }
        if (next == body_end)
            return bad("route stack has no delimiter");
        ++next;  // the empty delimiter
    }
    const size_t wanted = ((flags & msgflag::topic) ? 1 : 0) + ((flags & msgflag::payload) ? 1 : 0);
    if (body_end - next != wanted)
        return bad(fmt::format("{} frames between route and header (flags say {})", body_end - next, wanted));
    if (flags & msgflag::topic) {
        if (!valid_topic(frames[next]))
            return bad("topic must be 1-255 printable ASCII bytes without spaces");
        msg.topic = frames[next++];
    }
    if (flags & msgflag::payload) {
        const std::string& text = frames[next];
        if (text.size() > limits.max_payload)
            return bad(fmt::format("payload of {} bytes (at most {})", text.size(), limits.max_payload));
        // Validate without building a tree: routers forward the text as is.
        if (text.empty() || text.front() != '{' || !nlohmann::json::accept(text))
            return bad("payload is not a JSON object");
        msg.payload = text;
    }
    return msg;
}

std::string encode_stream(const Message& msg) {
    Frames frames = encode(msg);
    size_t total = 4;
    for (const auto& f : frames)
        total += 4 + f.size();
    std::string out;
    out.reserve(total);
    put_u32(out, static_cast<uint32_t>(frames.size()));
    for (const auto& f : frames) {
        put_u32(out, static_cast<uint32_t>(f.size()));
        out.append(f);
    }
    return out;
}

Result<std::optional<Message>> StreamDecoder::next() {
    const size_t avail = buffer_.size() - consumed_;
    const char* p = buffer_.data() + consumed_;
    if (avail < 4)
        return std::optional<Message>{};
    uint32_t nframes = get_u32(p);
    if (nframes == 0 || nframes > kMaxFrames)
        return bad(fmt::format("stream frame count {} (expected 1-{})", nframes, kMaxFrames));
    // The whole message, not each frame, is bounded: 68 frames of the
    // largest size would make one message of 1.1 GiB.
    const size_t max_message = limits_.max_payload + kStreamOverhead;
    // First only the lengths are read: a message whose bytes have not all
    // come yet costs a walk over its frame headers, never a copy, so a
    // large message arriving in small reads is read in linear time.
    size_t offset = 4;
    size_t total = 0;
    for (uint32_t i = 0; i < nframes; i++) {
        if (avail - offset < 4)
            return std::optional<Message>{};
        uint32_t len = get_u32(p + offset);
        total += len;
        if (total > max_message)
            return bad(fmt::format("stream message of more than {} bytes (at most {})", total, max_message));
        offset += 4;
        if (avail - offset < len)
            return std::optional<Message>{};
        offset += len;
    }
    Frames frames;
    frames.reserve(nframes);
    for (size_t at = 4; at < offset;) {
        uint32_t len = get_u32(p + at);
        frames.emplace_back(p + at + 4, len);
        at += 4 + len;
    }
    consumed_ += offset;
    // Compact once the consumed prefix dominates, so the buffer stays bounded.
    if (consumed_ > 65536 && consumed_ * 2 > buffer_.size()) {
        buffer_.erase(0, consumed_);
        consumed_ = 0;
    }
    auto msg = decode(frames, limits_);
    if (!msg)
        return msg.error();
    return std::optional<Message>{std::move(msg).value()};
}

std::string_view to_string(MessageType type) {
    switch (type) {
        case MessageType::request:
            return "request";
        case MessageType::response:
            return "response";
        case MessageType::event:
            return "event";
        case MessageType::control:
            return "control";
    }
    return "unknown";
}

}  // namespace banyan
