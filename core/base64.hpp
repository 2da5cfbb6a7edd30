// Base64 (RFC 4648, with padding): binary data inside JSON messages.
#pragma once

#include <string>
#include <string_view>

#include "core/result.hpp"

namespace banyan {

std::string base64_encode(std::string_view bytes);
// Error (EINVAL) on a character outside the alphabet or a bad length.
Result<std::string> base64_decode(std::string_view text);

}  // namespace banyan
