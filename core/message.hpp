// The Banyan message: one format for every process (doc/spec/messages.md).
// encode() turns a Message into frames; decode() is strict and total: any
// input that breaks the spec yields an Error, never undefined behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.hpp"

namespace banyan {

enum class MessageType : uint8_t { request = 1, response = 2, event = 4, control = 8 };

// Flags a caller sets (doc/spec/messages.md section 3). TOPIC, PAYLOAD and
// ROUTE are derived from the Message's contents by encode().
namespace msgflag {
constexpr uint8_t topic = 0x01;
constexpr uint8_t payload = 0x02;
constexpr uint8_t noresponse = 0x04;
constexpr uint8_t route = 0x08;
constexpr uint8_t upstream = 0x10;
constexpr uint8_t private_event = 0x20;
constexpr uint8_t streaming = 0x40;
}  // namespace msgflag

namespace role {
constexpr uint32_t none = 0;
constexpr uint32_t owner = 0x1;
constexpr uint32_t user = 0x2;
}  // namespace role

constexpr uint32_t kUserIdUnknown = 0xffffffff;
constexpr uint32_t kNodeIdAny = 0xffffffff;
constexpr size_t kHeaderSize = 20;
constexpr size_t kMaxTopic = 255;
constexpr size_t kMaxRouteFrame = 255;
constexpr size_t kMaxRouteDepth = 64;
constexpr size_t kMaxFrames = kMaxRouteDepth + 4;
constexpr size_t kDefaultMaxPayload = 16u << 20;

using Frames = std::vector<std::string>;

struct Message {
    MessageType type = MessageType::request;
    uint8_t flags = 0;  // noresponse, upstream, private_event, streaming
    uint32_t userid = kUserIdUnknown;
    uint32_t rolemask = role::none;
    uint32_t nodeid = kNodeIdAny;    // request
    uint32_t errnum = 0;             // response
    uint32_t sequence = 0;           // event
    uint32_t control_type = 0;       // control
    uint32_t control_status = 0;     // control
    uint32_t matchtag = 0;           // request, response
    bool routed = false;             // true when a route stack (maybe empty) is carried
    std::vector<std::string> route;  // newest hop first
    std::string topic;
    std::optional<std::string> payload;  // JSON object text

    static Message request(std::string topic, const nlohmann::json& body, uint32_t nodeid = kNodeIdAny);
    // A response to `req`: same topic, matchtag and route; errnum 0.
    static Message response_to(const Message& req, const nlohmann::json& body);
    // An error response to `req`; `errstr` (if not empty) goes in the payload.
    static Message error_to(const Message& req, int errnum, std::string_view errstr = {});
    static Message event(std::string topic, const nlohmann::json& body);
    static Message control(uint32_t control_type, uint32_t status);

    bool has_flag(uint8_t flag) const { return (flags & flag) != 0; }
    // A request that wants an answer (no NORESPONSE flag).
    bool wants_response() const { return type == MessageType::request && !has_flag(msgflag::noresponse); }
    // The last answer to its request: not streaming, or the error that
    // ends a stream (section 3 of doc/spec/messages.md).
    bool is_final_response() const {
        return type == MessageType::response && (!has_flag(msgflag::streaming) || errnum != 0);
    }
    // Parses the payload; an absent payload reads as an empty object.
    // Error only if the payload was never validated (built by hand) and is bad.
    Result<nlohmann::json> json() const;
    // For error responses: the errstr in the payload, or strerror(errnum).
    std::string error_text() const;

    void push_route(std::string hop);
    // Removes and returns the newest hop; empty string when there is none.
    std::string pop_route();
};

struct DecodeLimits {
    size_t max_payload = kDefaultMaxPayload;
};

Frames encode(const Message& msg);
Result<Message> decode(const Frames& frames, const DecodeLimits& limits = {});

// Stream framing for byte streams (spec section 5).
std::string encode_stream(const Message& msg);

// Splits a byte stream into messages. Feed it whatever read() returned;
// next() yields complete messages, nullopt when more bytes are needed, or
// an Error after which the stream is unusable (close the connection).
class StreamDecoder {
  public:
    explicit StreamDecoder(DecodeLimits limits = {}) : limits_(limits) {}
    void feed(std::string_view bytes) { buffer_.append(bytes); }
    Result<std::optional<Message>> next();
    size_t buffered() const { return buffer_.size() - consumed_; }

  private:
    DecodeLimits limits_;
    std::string buffer_;
    size_t consumed_ = 0;
};

std::string_view to_string(MessageType type);

}  // namespace banyan
