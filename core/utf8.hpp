// UTF-8 repair: JSON strings must be UTF-8, task output may be anything.
#pragma once

#include <string>

namespace banyan {

// `in` with every invalid byte replaced by U+FFFD.
std::string valid_utf8(const std::string& in);

}  // namespace banyan
