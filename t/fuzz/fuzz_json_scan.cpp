// Fuzzes the JSON scanner (core/json_parse: parse_json_except, json_raw_at,
// json_array_items) against the parser: whatever the scanner accepts that
// the parser also accepts must agree with it, member by member and item
// by item, and the scanner must accept every object and array the parser
// does (within the nesting bound).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/json_parse.hpp"

using namespace banyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    auto parsed = parse_json(text);
    std::vector<std::string_view> items;
    auto listed = json_array_items(text, items);
    if (parsed && parsed->is_array()) {
        if (!listed || items.size() != parsed->size())
            std::abort();
        for (size_t i = 0; i < items.size(); ++i) {
            auto item = parse_json(items[i]);
            if (!item || *item != (*parsed)[i])
                std::abort();
        }
    }
    auto except = parse_json_except(text, "a");
    auto raw = json_raw_at(text, {"a", "b"});
    if (parsed && parsed->is_object()) {
        if (!except || !raw)
            std::abort();
        const auto& whole = *parsed;
        if (whole.contains("a") != except->raw.has_value())
            std::abort();
        if (except->raw) {
            auto a = parse_json(*except->raw);
            if (!a || *a != whole["a"])
                std::abort();
        }
        for (const auto& [key, value] : except->rest.items())
            if (key == "a" || !whole.contains(key) || whole[key] != value)
                std::abort();
        if (except->rest.size() + (whole.contains("a") ? 1 : 0) != whole.size())
            std::abort();
        bool has_b = whole.contains("a") && whole["a"].is_object() && whole["a"].contains("b");
        if (has_b != (raw->has_value()))
            std::abort();
        if (has_b) {
            auto b = parse_json(**raw);
            if (!b || *b != whole["a"]["b"])
                std::abort();
        }
    }
    return 0;
}
