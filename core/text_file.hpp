// read_text_file: a whole file as a string. Error: "PATH: cannot read: REASON".
#pragma once

#include <string>

#include "core/result.hpp"

namespace banyan {

Result<std::string> read_text_file(const std::string& path);

}  // namespace banyan
