// parse_json: the one way to parse JSON text that came from outside the
// process (a message payload, a line from a shell, a file, a database
// row); and the one scanner that finds values in JSON text without
// parsing it (parse_json_except, json_raw_at, json_array_items), for
// large payloads only passed on or rewritten. Bounded nesting: nlohmann's parser is iterative, but copying,
// comparing and dumping a document recurse once per level, so a small
// request nested 100,000 deep would overflow the stack of whoever handles it.
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.hpp"

namespace banyan {

// Deeper than any document Banyan reads (a jobspec of ten nested resource
// levels is about 25 deep).
constexpr size_t kMaxJsonDepth = 64;

// The nesting depth of JSON text (arrays and objects), counted without
// parsing; stops counting past `limit` (returns limit + 1).
size_t json_depth(std::string_view text, size_t limit = kMaxJsonDepth);

// Parses `text`. Error EPROTO: "not valid JSON", or "JSON nested deeper
// than 64 levels".
Result<nlohmann::json> parse_json(std::string_view text);

// A JSON object parsed whole but for one member, whose value stays raw
// text: for a large value that is only passed on (exec.run's jobspec, on
// its way to the shell). The raw value is checked for well-formed strings
// and matching brackets, not parsed: whoever reads it parses it. A key
// given twice counts once, the last, as parse_json keeps it.
struct JsonWithRaw {
    nlohmann::json rest;                  // every other member, parsed
    std::optional<std::string_view> raw;  // the member's value, within `text`
};
Result<JsonWithRaw> parse_json_except(std::string_view text, std::string_view key);

// The raw text of the value at `path` (keys of nested objects) within the
// JSON object `text`, found the same way, nothing parsed; nullopt when a
// key on the path is missing, a value before the last is not an object,
// or `text` is not an object at all (an empty path gives `text` itself).
Result<std::optional<std::string_view>> json_raw_at(std::string_view text,
                                                    std::initializer_list<std::string_view> path);

// The elements of the JSON array `text`, as spans of it, into `items`
// (cleared first; reusable from row to row), found the same way, nothing
// parsed. Error EPROTO when `text` is not an array.
Result<void> json_array_items(std::string_view text, std::vector<std::string_view>& items);

}  // namespace banyan
