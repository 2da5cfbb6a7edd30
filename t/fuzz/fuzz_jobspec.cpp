// Fuzzes jobspec parsing (YAML/JSON) under both rule sets: any input gives
// a Jobspec or an Error whose message is one line.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sched/jobspec.hpp"

using namespace banyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    for (auto rules : {JobspecRules::canonical, JobspecRules::v1}) {
        auto spec = Jobspec::parse(text, rules);
        if (!spec.ok() && spec.error().message.find('\n') != std::string::npos)
            std::abort();
    }
    return 0;
}
