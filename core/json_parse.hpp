// parse_json: the one way to parse JSON text that came from outside the
// process (a message payload, a line from a shell, a file, a database
// row). Bounded nesting: nlohmann's parser is iterative, but copying,
// comparing and dumping a document recurse once per level, so a small
// request nested 100,000 deep would overflow the stack of whoever handles it.
#pragma once

#include <string_view>

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

}  // namespace banyan
