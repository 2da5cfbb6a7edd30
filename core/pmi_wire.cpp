#include "core/pmi_wire.hpp"

namespace banyan {

std::optional<std::map<std::string, std::string>> parse_pmi_line(std::string_view line) {
    std::map<std::string, std::string> out;
    while (!line.empty()) {
        while (line.starts_with(' '))
            line.remove_prefix(1);
        if (line.empty())
            break;
        // The last word may hold spaces: a value, an abort's message.
        bool rest_of_line = false;
        for (std::string_view key : {"value", "message", "msg"})
            if (line.starts_with(key) && line.substr(key.size()).starts_with('=')) {
                out[std::string(key)] = std::string(line.substr(key.size() + 1));
                rest_of_line = true;
            }
        if (rest_of_line)
            break;
        size_t end = line.find(' ');
        std::string_view word = line.substr(0, end);
        size_t eq = word.find('=');
        if (eq == std::string_view::npos || eq == 0)
            return std::nullopt;
        out[std::string(word.substr(0, eq))] = std::string(word.substr(eq + 1));
        line.remove_prefix(end == std::string_view::npos ? line.size() : end);
    }
    if (!out.count("cmd"))
        return std::nullopt;
    return out;
}

}  // namespace banyan
