// Small text helpers shared by the CLI and the shell.
#pragma once

#include <string>
#include <string_view>

namespace banyan {

// `text` with every `from` replaced by `to` (left to right, no rescans).
std::string replace_all(std::string text, std::string_view from, std::string_view to);

}  // namespace banyan
