#include <catch2/catch.hpp>

#include <chrono>

#include "core/message.hpp"

using namespace banyan;

namespace {

std::string header(uint8_t magic, uint8_t version, uint8_t type, uint8_t flags, uint32_t aux2 = 0) {
    std::string h = {static_cast<char>(magic), static_cast<char>(version), static_cast<char>(type),
                     static_cast<char>(flags)};
    h.append(12, '\0');
    for (int shift = 24; shift >= 0; shift -= 8)
        h.push_back(static_cast<char>(aux2 >> shift));
    return h;
}

Message round_trip(const Message& msg) {
    auto decoded = decode(encode(msg));
    REQUIRE(decoded.ok());
    return *decoded;
}

}  // namespace

TEST_CASE("request round-trips with every header field", "[message]") {
    Message req = Message::request("broker.ping", {{"seq", 1}}, 3);
    req.userid = 1000;
    req.rolemask = role::owner;
    req.matchtag = 7;
    req.flags = msgflag::streaming;
    req.push_route("c1");
    Message out = round_trip(req);
    CHECK(out.type == MessageType::request);
    CHECK(out.topic == "broker.ping");
    CHECK(out.userid == 1000);
    CHECK(out.rolemask == role::owner);
    CHECK(out.nodeid == 3);
    CHECK(out.matchtag == 7);
    CHECK(out.has_flag(msgflag::streaming));
    CHECK(out.routed);
    CHECK(out.route == std::vector<std::string>{"c1"});
    CHECK(out.json()->at("seq") == 1);
}

TEST_CASE("the example in doc/spec/messages.md encodes byte for byte", "[message]") {
    Message req = Message::request("broker.ping", {{"seq", 1}}, 3);
    req.userid = 1000;
    req.rolemask = role::owner;
    req.matchtag = 7;
    req.push_route("c1");
    Frames frames = encode(req);
    REQUIRE(frames.size() == 5);
    CHECK(frames[0] == "c1");
    CHECK(frames[1].empty());
    CHECK(frames[2] == "broker.ping");
    CHECK(frames[3] == R"({"seq":1})");
    const unsigned char expected[20] = {0x8e, 0x01, 0x01, 0x0b, 0, 0, 0x03, 0xe8, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 7};
    CHECK(frames[4] == std::string(reinterpret_cast<const char*>(expected), 20));
}

TEST_CASE("responses, events and control messages round-trip", "[message]") {
    Message req = Message::request("job.submit", {{"a", 1}});
    req.matchtag = 42;
    req.push_route("r1");
    req.push_route("r0");

    Message err = round_trip(Message::error_to(req, ENOSYS, "no service job"));
    CHECK(err.type == MessageType::response);
    CHECK(err.errnum == ENOSYS);
    CHECK(err.matchtag == 42);
    CHECK(err.route == std::vector<std::string>{"r0", "r1"});
    CHECK(err.error_text() == "no service job");

    Message bare_err = round_trip(Message::error_to(req, EHOSTUNREACH));
    CHECK(!bare_err.payload);
    CHECK(bare_err.error_text() == std::strerror(EHOSTUNREACH));

    Message ev = Message::event("job.state", {{"id", 5}});
    ev.sequence = 99;
    Message ev_out = round_trip(ev);
    CHECK(ev_out.type == MessageType::event);
    CHECK(ev_out.sequence == 99);
    CHECK(!ev_out.routed);

    Message ctl = round_trip(Message::control(3, 17));
    CHECK(ctl.type == MessageType::control);
    CHECK(ctl.control_type == 3);
    CHECK(ctl.control_status == 17);
    CHECK(ctl.topic.empty());
}

TEST_CASE("route stack pushes and pops newest first", "[message]") {
    Message m = Message::request("a.b", nullptr);
    CHECK(!m.routed);
    m.push_route("1");
    m.push_route("2");
    CHECK(m.pop_route() == "2");
    CHECK(m.pop_route() == "1");
    CHECK(m.pop_route().empty());
    CHECK(m.routed);  // an empty stack is still carried (k = 0)
    Message out = round_trip(m);
    CHECK(out.routed);
    CHECK(out.route.empty());
}

TEST_CASE("an absent payload reads as an empty object", "[message]") {
    Message m = round_trip(Message::request("a.b", nullptr));
    CHECK(!m.payload);
    CHECK(m.json()->empty());
}

TEST_CASE("decode rejects malformed frames", "[message][malformed]") {
    const Frames good = encode(Message::request("svc.method", {{"k", "v"}}));
    struct Case {
        const char* name;
        Frames frames;
    };
    auto with = [&](size_t i, std::string value) {
        Frames f = good;
        f[i] = std::move(value);
        return f;
    };
    const std::string route_flags = header(0x8e, 1, 1, msgflag::topic | msgflag::route);
    std::vector<Case> cases = {
        {"no frames", {}},
        {"header only, too short", {"\x8e\x01"}},
        {"header too long", with(2, good[2] + "x")},
        {"empty header", with(2, "")},
        {"bad magic", with(2, header(0x8f, 1, 1, msgflag::topic | msgflag::payload))},
        {"bad version", with(2, header(0x8e, 2, 1, msgflag::topic | msgflag::payload))},
        {"type 0", with(2, header(0x8e, 1, 0, msgflag::topic | msgflag::payload))},
        {"type 3", with(2, header(0x8e, 1, 3, msgflag::topic | msgflag::payload))},
        {"reserved flag", with(2, header(0x8e, 1, 1, msgflag::topic | msgflag::payload | 0x80))},
        {"private flag on a request", with(2, header(0x8e, 1, 1, msgflag::topic | msgflag::payload | 0x20))},
        {"request without topic flag", with(2, header(0x8e, 1, 1, msgflag::payload))},
        {"control with a topic", with(2, header(0x8e, 1, 8, msgflag::topic | msgflag::payload))},
        {"event with a route", with(2, header(0x8e, 1, 4, msgflag::topic | msgflag::payload | msgflag::route))},
        {"event with aux2 set", with(2, header(0x8e, 1, 4, msgflag::topic | msgflag::payload, 5))},
        {"truncated: payload missing", {good[0], good[2]}},
        {"extra frame", {good[0], good[1], "extra", good[2]}},
        {"payload flag but no payload", with(2, header(0x8e, 1, 1, msgflag::topic))},
        {"empty topic", with(0, "")},
        {"topic with a space", with(0, "svc method")},
        {"topic with a control byte", with(0, std::string("svc\0m", 5))},
        {"topic too long", with(0, std::string(256, 'a'))},
        {"payload not JSON", with(1, "{not json")},
        {"payload a JSON array", with(1, "[1,2]")},
        {"payload a JSON number", with(1, "17")},
        {"payload trailing garbage", with(1, "{} {}")},
        {"payload empty", with(1, "")},
        {"payload bad UTF-8", with(1, "{\"k\":\"\xff\"}")},
        {"route without delimiter", {"r1", "topic.x", route_flags}},
        {"route frame too long", {std::string(256, 'r'), "", "topic.x", route_flags}},
        {"route too deep", [&] {
             Frames f(65, "r");
             f.insert(f.end(), {"", "topic.x", route_flags});
             return f;
         }()},
        {"too many frames", Frames(100, "x")},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        auto r = decode(c.frames);
        CHECK(!r.ok());
        if (!r.ok()) {
            CHECK(r.error().code == EPROTO);
            CHECK(r.error().message.rfind("malformed message: ", 0) == 0);
        }
    }
}

TEST_CASE("decode enforces the payload size limit", "[message][malformed]") {
    Message m = Message::request("a.b", {{"blob", std::string(1000, 'x')}});
    CHECK(decode(encode(m), DecodeLimits{.max_payload = 2000}).ok());
    auto r = decode(encode(m), DecodeLimits{.max_payload = 100});
    REQUIRE(!r.ok());
    CHECK(r.error().message.find("payload of") != std::string::npos);
}

TEST_CASE("stream decoder reassembles messages from any split", "[message]") {
    Message a = Message::request("a.one", {{"n", 1}});
    Message b = Message::event("b.two", {{"n", 2}});
    std::string bytes = encode_stream(a) + encode_stream(b);
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{7}, bytes.size()}) {
        StreamDecoder dec;
        std::vector<Message> got;
        for (size_t i = 0; i < bytes.size(); i += chunk) {
            dec.feed(std::string_view(bytes).substr(i, chunk));
            while (true) {
                auto r = dec.next();
                REQUIRE(r.ok());
                if (!*r)
                    break;
                got.push_back(std::move(**r));
            }
        }
        REQUIRE(got.size() == 2);
        CHECK(got[0].topic == "a.one");
        CHECK(got[1].topic == "b.two");
        CHECK(dec.buffered() == 0);
    }
}

TEST_CASE("stream decoder rejects bad framing", "[message][malformed]") {
    auto fails = [](std::string bytes) {
        StreamDecoder dec(DecodeLimits{.max_payload = 1024});
        dec.feed(bytes);
        return !dec.next().ok();
    };
    CHECK(fails(std::string("\0\0\0\0", 4)));                  // zero frames
    CHECK(fails(std::string("\0\0\1\0", 4)));                  // 256 frames
    CHECK(fails(std::string("\0\0\0\1\x7f\xff\xff\xff", 8)));  // frame of 2 GiB
    CHECK(fails(std::string("\0\0\0\1\0\0\0\2ab", 10)));       // one frame that is no header
    // A partial message is not an error: more bytes may come.
    StreamDecoder dec;
    dec.feed(std::string("\0\0\0\2\0\0", 6));
    auto r = dec.next();
    REQUIRE(r.ok());
    CHECK(!r->has_value());
}

TEST_CASE("stream decoder bounds the whole message and reads it in linear time", "[message][malformed]") {
    auto u32 = [](uint32_t v) {
        return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                           static_cast<char>(v)};
    };
    // 68 frames of 60,000 bytes each under a 1024-byte payload limit (a
    // frame may be 64 KiB more than the payload): each frame fits, the
    // message does not; refused once the lengths say so, before the bytes
    // come.
    StreamDecoder small(DecodeLimits{.max_payload = 1024});
    std::string bytes = u32(68);
    for (int i = 0; i < 68; i++)
        bytes += u32(60000) + std::string(60000, 'x');
    small.feed(bytes.substr(0, 4 + 2 * 60004 + 4));
    auto r = small.next();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("stream message of more than") != std::string::npos);

    // A 16 MiB message of 60 frames, fed 4 KiB at a time, as a slow client
    // writes it: every partial read costs a walk of its frame lengths, not
    // a copy of the frames so far (that was quadratic: 256 MiB took 229 s).
    StreamDecoder dec;
    std::string big = u32(60);
    for (int i = 0; i < 60; i++)
        big += u32(280000) + std::string(280000, 'y');
    auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < big.size(); i += 4096) {
        dec.feed(std::string_view(big).substr(i, 4096));
        auto next = dec.next();
        if (i + 4096 < big.size())
            REQUIRE((next.ok() && !next->has_value()));
        else
            CHECK_FALSE(next.ok());  // complete: 60 frames are no message (section 1)
    }
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("first_error names the first bad field in the order given", "[result]") {
    Result<int> a = 1;
    Result<std::string> b = make_error(EPROTO, "b: expected a string");
    Result<double> c = make_error(EINVAL, "c: expected a number");
    CHECK_FALSE(first_error(a, a).has_value());
    REQUIRE(first_error(a, b, c).has_value());
    CHECK(first_error(a, b, c)->message == "b: expected a string");
    CHECK(first_error(c, b)->code == EINVAL);
}

TEST_CASE("error messages are one line whatever they quote", "[result]") {
    Error e = make_error(EINVAL, "bad key 'a\nb\tc\x01' here");
    CHECK(e.message == "bad key 'a\\nb\\tc\\x01' here");
    CHECK(one_line("plain") == "plain");
}
