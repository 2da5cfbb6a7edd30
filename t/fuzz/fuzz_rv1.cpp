// Fuzzes R v1 and node-description decoding; an accepted R must write out
// and read back to the same value.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "resource/node.hpp"
#include "resource/rv1.hpp"

using namespace banyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    auto r = Rv1::parse(text);
    if (r.ok()) {
        auto again = Rv1::from_json(r->to_json());
        if (!again.ok() || !(*again == *r))
            std::abort();
    }
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_discarded())
        (void)NodeDescription::from_json(j);
    return 0;
}
