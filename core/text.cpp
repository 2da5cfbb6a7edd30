#include "core/text.hpp"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace banyan {

std::vector<std::string> split(std::string_view text, char separator) {
    std::vector<std::string> items;
    size_t start = 0;
    for (size_t at; (at = text.find(separator, start)) != std::string_view::npos; start = at + 1)
        items.emplace_back(text.substr(start, at - start));
    items.emplace_back(text.substr(start));
    return items;
}

std::vector<std::string> split_commas(std::string_view text) {
    return split(text, ',');
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
    for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
        text.replace(pos, from.size(), to);
    return text;
}

namespace {

// The length of the UTF-8 sequence a byte starts: 1 for ASCII, 2-4 for a
// lead byte, 0 for a byte no well-formed sequence starts with.
size_t sequence_length(unsigned char byte) {
    return byte < 0x80 ? 1 : byte >= 0xC2 && byte <= 0xDF ? 2 : byte >= 0xE0 && byte <= 0xEF ? 3
         : byte >= 0xF0 && byte <= 0xF4 ? 4 : 0;
}

}  // namespace

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
    // A byte that starts no sequence is not waited for: nothing completes it.
    size_t need = std::max<size_t>(sequence_length(static_cast<unsigned char>(text[lead])), 1);
    return text.size() - lead < need ? lead : text.size();
}

bool is_valid_utf8(std::string_view text) {
    auto at = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    for (size_t i = 0; i < text.size();) {
        unsigned char b = at(i);
        size_t length = sequence_length(b);
        if (length == 1) {
            i++;
            continue;
        }
        if (length == 0 || i + length > text.size())
            return false;
        // The second byte's range excludes overlong forms, surrogates and
        // code points past U+10FFFF.
        unsigned char low = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
        unsigned char high = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
        if (at(i + 1) < low || at(i + 1) > high)
            return false;
        for (size_t k = 2; k < length; k++)
            if ((at(i + k) & 0xC0) != 0x80)
                return false;
        i += length;
    }
    return true;
}

Result<int> parse_signal(std::string_view text) {
    if (!text.empty() && text.size() < 4 && std::all_of(text.begin(), text.end(), ::isdigit)) {
        int n = std::atoi(std::string(text).c_str());
        if (n >= 1 && n < NSIG)
            return n;
    } else {
        std::string name;
        for (char c : text)
            name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (name.starts_with("SIG"))
            name.erase(0, 3);
        for (int n = 1; n < NSIG; n++)
            if (const char* abbrev = sigabbrev_np(n); abbrev && name == abbrev)
                return n;
    }
    return make_error(EINVAL, fmt::format("{}: not a signal (give a name like TERM or USR1, or a number 1-{})",
                                          one_line(text), NSIG - 1));
}

}  // namespace banyan
