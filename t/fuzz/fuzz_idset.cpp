// Fuzzes IdSet::parse; an accepted set must format to text that parses to
// the same set, and the set operations must keep their invariants.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/idset.hpp"

using namespace banyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    auto set = IdSet::parse(text);
    if (!set.ok())
        return 0;
    auto again = IdSet::parse(set->format());
    if (!again.ok() || !(*again == *set))
        std::abort();
    IdSet probe = IdSet::range(3, 40);
    IdSet both = set->union_with(probe);
    if (both.count() != set->count() + probe.count() - set->intersection(probe).count())
        std::abort();
    if (!set->difference(probe).intersection(probe).empty())
        std::abort();
    if (!set->empty() && (!set->contains(set->first()) || !set->contains(set->last())))
        std::abort();
    return 0;
}
