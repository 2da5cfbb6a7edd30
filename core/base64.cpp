#include "core/base64.hpp"

#include <cerrno>

#include <sodium.h>

namespace banyan {

std::string base64_encode(std::string_view bytes) {
    const int variant = sodium_base64_VARIANT_ORIGINAL;
    std::string out(sodium_base64_ENCODED_LEN(bytes.size(), variant), '\0');
    sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                      variant);
    out.resize(out.size() - 1);  // the encoder's NUL
    return out;
}

Result<std::string> base64_decode(std::string_view text) {
    std::string out(text.size() / 4 * 3 + 3, '\0');
    size_t length = 0;
    const char* end = nullptr;
    if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(), nullptr,
                          &length, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
        end != text.data() + text.size())
        return make_error(EINVAL, "not valid base64");
    out.resize(length);
    return out;
}

}  // namespace banyan
