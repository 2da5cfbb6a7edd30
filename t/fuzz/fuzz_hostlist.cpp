// Fuzzes HostList::parse; an accepted list must format to text that parses
// back to the same hosts in the same order.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/hostlist.hpp"

using namespace banyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 256)  // keep expansions small enough for many runs a second
        return 0;
    std::string_view text(reinterpret_cast<const char*>(data), size);
    auto list = HostList::parse(text);
    if (!list.ok())
        return 0;
    auto again = HostList::parse(list->format());
    if (!again.ok() || !(*again == *list))
        std::abort();
    return 0;
}
