// Fuzzes parse_pmi_line (the PMI-1 wire lines a task sends its shell): a
// line it accepts has `cmd`, no empty key, and one written back from its
// words parses to the same map.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/pmi_wire.hpp"

using namespace banyan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view line(reinterpret_cast<const char*>(data), size);
    auto words = parse_pmi_line(line);
    if (!words)
        return 0;
    if (!words->count("cmd"))
        std::abort();
    // Written back: the words that run to the end of the line go last.
    std::string again;
    std::string tail;
    for (const auto& [key, value] : *words) {
        if (key.empty())
            std::abort();
        if (key == "value" || key == "message" || key == "msg") {
            if (!tail.empty())
                std::abort();  // the first such word runs to the end of the line
            tail = key + "=" + value;
            continue;
        }
        if (value.find(' ') != std::string::npos || key.find(' ') != std::string::npos)
            std::abort();
        again += key + "=" + value + " ";
    }
    again += tail;
    auto reread = parse_pmi_line(again);
    if (!reread || *reread != *words)
        std::abort();
    return 0;
}
