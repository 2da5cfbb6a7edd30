// Fuzzes HostList::parse; an accepted list must format to text that parses
// back to the same hosts in the same order.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/hostlist.hpp"

using namespace banyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // A smaller cap than the default million keeps each run fast, so the
    // fuzzer explores syntax rather than spending seconds expanding.
    constexpr size_t kFuzzMaxHosts = 1000;
    std::string_view text(reinterpret_cast<const char*>(data), size);
    auto list = HostList::parse(text, kFuzzMaxHosts);
    if (!list.ok())
        return 0;
    auto again = HostList::parse(list->format(), kFuzzMaxHosts);
    if (!again.ok() || !(*again == *list))
        std::abort();
    return 0;
}
