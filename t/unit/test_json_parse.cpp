// parse_json: the bounded parser for text from outside the process.
#include <catch2/catch.hpp>

#include <string>

#include "core/json_field.hpp"
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

TEST_CASE("parse_json_except keeps one member raw and parses the rest", "[json]") {
    auto r = parse_json_except(R"( {"id": 7, "jobspec": {"a": [1, "}]"], "b": {}} , "R": {"x": "y"}} )", "jobspec");
    REQUIRE(r.ok());
    CHECK(r->raw == std::string_view(R"({"a": [1, "}]"], "b": {}})"));
    CHECK(r->rest == nlohmann::json{{"id", 7}, {"R", {{"x", "y"}}}});
    CHECK(parse_json(*r->raw)->at("a")[1] == "}]");

    auto absent = parse_json_except(R"({"id": 7})", "jobspec");
    REQUIRE(absent.ok());
    CHECK_FALSE(absent->raw);
    CHECK(parse_json_except("{}", "jobspec")->rest == nlohmann::json::object());

    // A repeated key counts once, the last, as parse_json keeps it.
    auto twice = parse_json_except(R"({"jobspec": 1, "id": 1, "jobspec": {"z": 2}, "id": 2})", "jobspec");
    CHECK(twice->raw == std::string_view(R"({"z": 2})"));
    CHECK(twice->rest["id"] == 2);
    CHECK(parse_json(R"({"id": 1, "id": 2})")->at("id") == 2);

    // An escaped key is decoded.
    CHECK(parse_json_except(R"({"job\u0073pec": [], "\"q\"": 1})", "jobspec")->raw == std::string_view("[]"));
}

TEST_CASE("parse_json_except refuses what parse_json refuses, with the same line", "[json]") {
    for (const char* bad : {"", "[]", "{", "{\"a\"}", "{\"a\":}", "{\"a\": 1,}", "{\"a\": 1} x", "{\"a\": [1}}",
                            "{\"a\": {\"b\": 1]}", "{\"a\": \"\\\"}", "{\"a\": \"tab\there\"}", "{\"a\": tru}",
                            "{\"jobspec\": {\"x\": \"open}", "{\"jobspec\": {\"x\": 1}", "{\"a\" 1}", "{a: 1}"}) {
        INFO(bad);
        auto r = parse_json_except(bad, "jobspec");
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == EPROTO);
        CHECK(r.error().message == "not valid JSON");
    }
    // Deep nesting in the raw member is refused before anyone parses it.
    CHECK(parse_json_except("{\"jobspec\": " + nested(63) + "}", "jobspec").ok());
    auto deep = parse_json_except("{\"jobspec\": " + nested(64, '{', '}') + "}", "jobspec");
    REQUIRE_FALSE(deep.ok());
    CHECK(deep.error().message == "JSON nested deeper than 64 levels");
    CHECK(parse_json_except("{\"jobspec\": " + nested(100000) + "}", "jobspec").error().message ==
          "JSON nested deeper than 64 levels");
}

TEST_CASE("json_raw_at finds a nested value without parsing", "[json]") {
    std::string spec =
        R"({"attributes": {"system": {"environment": {"X": "}"}, "exec": {"test": {"run_duration": 0}}}}})";
    auto test = json_raw_at(spec, {"attributes", "system", "exec", "test"});
    REQUIRE(test.ok());
    REQUIRE(*test);
    CHECK(**test == R"({"run_duration": 0})");
    CHECK_FALSE(*json_raw_at(spec, {"attributes", "user"}));
    CHECK_FALSE(*json_raw_at(R"({"attributes": 5})", {"attributes", "system"}));
    CHECK(**json_raw_at(R"({"attributes": 5})", {"attributes"}) == "5");
    CHECK_FALSE(json_raw_at(R"({"attributes": {"system": [}})", {"attributes", "system"}).ok());
}

TEST_CASE("json_field: an integer field is read in the type's range, however the JSON holds it", "[json_field]") {
    nlohmann::json made{{"signed", 5}, {"negative", -1}, {"big", uint64_t{1} << 40}, {"text", "5"}};
    auto parsed = parse_json(R"({"unsigned": 5})");
    REQUIRE(parsed.ok());
    CHECK(*json_field<uint32_t>(made, "signed", 0) == 5);  // made in this process: a signed 5
    CHECK(*json_field<uint32_t>(*parsed, "unsigned", 0) == 5);
    CHECK(*json_field<int>(*parsed, "unsigned", 0) == 5);
    CHECK(json_field<uint32_t>(made, "negative", 0).error().message == "negative: expected a non-negative integer");
    CHECK(*json_field<int64_t>(made, "negative", 0) == -1);
    CHECK(json_field<uint32_t>(made, "big", 0).error().message == "big: expected a non-negative integer");
    CHECK(json_field<int>(made, "big", 0, "ctx").error().message == "ctx.big: expected an integer");
    CHECK(*json_field<uint64_t>(made, "big", 0) == uint64_t{1} << 40);
    CHECK(json_field<int>(made, "text", 0).error().message == "text: expected an integer");
    CHECK(*json_field<int>(made, "absent", 7) == 7);
}

TEST_CASE("json_array_items: an array's elements as spans of its text, nothing parsed", "[json_parse]") {
    std::vector<std::string_view> items{"left over"};
    REQUIRE(json_array_items(R"( [1, "a,]b" , {"x": [2, 3]}, [], null] )", items).ok());
    CHECK(items == std::vector<std::string_view>{"1", R"("a,]b")", R"({"x": [2, 3]})", "[]", "null"});
    REQUIRE(json_array_items("[]", items).ok());
    CHECK(items.empty());
    for (std::string_view bad : {"", "{}", "[1,]", "[1 2]", "[1", "[1] x", R"(["a)", "[[1]"})
        CHECK(json_array_items(bad, items).error().message == "not valid JSON");
    std::string deep = std::string(100, '[') + std::string(100, ']');
    CHECK(json_array_items(deep, items).error().message == "JSON nested deeper than 64 levels");
}

TEST_CASE("parse_json: a NUL byte is no end of the text", "[json_parse]") {
    using namespace std::string_literals;
    CHECK(parse_json("{\"a\":1}\0junk"s).error().message == "not valid JSON");
    CHECK(parse_json("[1]\0"s).error().message == "not valid JSON");
    CHECK(parse_json(R"(["a\u0000b"])").ok());  // an escaped one is a character like any other
}
