#include "core/base64.hpp"

#include <array>
#include <cerrno>

namespace banyan {
namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> decoding_table() {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    for (size_t i = 0; i < kAlphabet.size(); i++)
        t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
    return t;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        size_t n = std::min<size_t>(3, bytes.size() - i);
        uint32_t v = 0;
        for (size_t k = 0; k < 3; k++)
            v = v << 8 | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
        for (size_t k = 0; k < 4; k++)
            out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 0x3f] : '=';
    }
    return out;
}

Result<std::string> base64_decode(std::string_view text) {
    static constexpr auto table = decoding_table();
    if (text.size() % 4 != 0)
        return make_error(EINVAL, "base64: length is not a multiple of 4");
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (size_t i = 0; i < text.size(); i += 4) {
        uint32_t v = 0;
        size_t pad = 0;
        for (size_t k = 0; k < 4; k++) {
            char c = text[i + k];
            bool last_group = i + 4 == text.size();
            if (c == '=' && last_group && k >= 2) {
                pad++;
                v <<= 6;
                continue;
            }
            int8_t d = table[static_cast<unsigned char>(c)];
            if (d < 0 || pad > 0)
                return make_error(EINVAL, "base64: invalid character");
            v = v << 6 | static_cast<uint32_t>(d);
        }
        for (size_t k = 0; k < 3 - pad; k++)
            out += static_cast<char>((v >> (16 - 8 * k)) & 0xff);
    }
    return out;
}

}  // namespace banyan
