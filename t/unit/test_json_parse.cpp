// parse_json: the bounded parser for text from outside the process.
#include <catch2/catch.hpp>

#include <string>

#include "core/json_parse.hpp"
#include "core/message.hpp"

using namespace banyan;

namespace {

std::string nested(size_t depth, char open = '[', char close = ']') {
    return std::string(depth, open) + std::string(depth, close);
}

}  // namespace

TEST_CASE("json_depth counts arrays and objects, not brackets in strings", "[json]") {
    CHECK(json_depth("{}") == 1);
    CHECK(json_depth("1") == 0);
    CHECK(json_depth(R"({"a": [1, {"b": [[]]}]})") == 5);
    CHECK(json_depth(R"({"a": "[[[[[[[[[[", "b": "\"[[["})") == 1);
    CHECK(json_depth(nested(100000), 64) == 65);
}

TEST_CASE("parse_json refuses deep nesting and bad text with one line", "[json]") {
    CHECK(parse_json(nested(64)).ok());
    auto deep = parse_json(nested(65));
    REQUIRE_FALSE(deep.ok());
    CHECK(deep.error().message == "JSON nested deeper than 64 levels");
    auto huge = parse_json("{\"a\":" + nested(100000) + "}");
    REQUIRE_FALSE(huge.ok());
    CHECK(huge.error().code == EPROTO);
    CHECK(parse_json("{\"a\": ").error().message == "not valid JSON");
    CHECK((*parse_json(R"({"x": [1, 2]})"))["x"][1] == 2);
}

TEST_CASE("a message payload nested 100,000 deep is refused when read, not when routed", "[json][message]") {
    Message req = Message::request("broker.ping", nlohmann::json::object());
    req.payload = "{\"a\":" + nested(100000) + "}";
    auto decoded = decode(encode(req));
    REQUIRE(decoded.ok());  // valid JSON: routers pass it on without building it
    auto body = decoded->json();
    REQUIRE_FALSE(body.ok());
    CHECK(body.error().message == "malformed message: payload: JSON nested deeper than 64 levels");
}
