#include "core/text.hpp"

namespace banyan {

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
    for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
        text.replace(pos, from.size(), to);
    return text;
}

size_t utf8_complete_length(std::string_view text) {
    // Walk back over at most 3 continuation bytes to the lead byte.
    size_t lead = text.size();
    for (size_t back = 1; back <= 4 && back <= text.size(); back++) {
        auto byte = static_cast<unsigned char>(text[text.size() - back]);
        if ((byte & 0xC0) != 0x80) {
            lead = text.size() - back;
            break;
        }
    }
    if (lead == text.size())
        return text.size();  // empty, or only continuation bytes: nothing to wait for
    auto byte = static_cast<unsigned char>(text[lead]);
    size_t need = byte >= 0xF0 && byte <= 0xF4 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC2 && byte <= 0xDF ? 2 : 1;
    if (byte >= 0xF5)
        need = 1;  // not a lead byte
    return text.size() - lead < need ? lead : text.size();
}

}  // namespace banyan
