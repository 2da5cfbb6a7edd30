#include "core/json_parse.hpp"

#include <fmt/format.h>

namespace banyan {

size_t json_depth(std::string_view text, size_t limit) {
    size_t depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > deepest && (deepest = depth) > limit)
                return limit + 1;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

Result<nlohmann::json> parse_json(std::string_view text) {
    if (json_depth(text) > kMaxJsonDepth)
        return make_error(EPROTO, fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
    auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded())
        return make_error(EPROTO, "not valid JSON");
    return doc;
}

}  // namespace banyan
