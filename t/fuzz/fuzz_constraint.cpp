// Fuzzes Constraint::parse_query (the text of `banyan submit --requires`):
// what it accepts is RFC 31 JSON that Constraint::from_json accepts, and
// the constraint's description reads back to the same constraint.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sched/constraint.hpp"

using namespace banyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    auto json = Constraint::parse_query(text);
    if (!json)
        return 0;
    auto c = Constraint::from_json(*json);
    if (!c)
        std::abort();
    auto again = Constraint::parse_query(c->describe());
    if (!again)
        std::abort();
    auto c2 = Constraint::from_json(*again);
    if (!c2 || c2->describe() != c->describe())
        std::abort();
    // Matching never throws, whatever the node.
    (void)c->match("node7", 7, [](std::string_view name) { return name.size() % 2 == 0; });
    return 0;
}
