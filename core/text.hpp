// Small text helpers shared by the CLI and the shell.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace banyan {

// The items of `text` between `separator`s ("a,,b" has an empty middle one).
std::vector<std::string> split(std::string_view text, char separator);
// The comma-separated items of `text`.
std::vector<std::string> split_commas(std::string_view text);

// `text` with every `from` replaced by `to` (left to right, no rescans).
std::string replace_all(std::string text, std::string_view from, std::string_view to);

// The length of `text` without a UTF-8 character cut short at its end (the
// first bytes of a multi-byte sequence whose rest has not arrived yet):
// what a stream read in chunks can pass on now. Invalid bytes are not
// held back.
size_t utf8_complete_length(std::string_view text);

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF).
bool is_valid_utf8(std::string_view text);

// A signal as users write it: a name with or without SIG, any case
// (TERM, SIGUSR1, kill), or a number 1 to NSIG-1. Error EINVAL names the
// text and the forms.
Result<int> parse_signal(std::string_view text);

}  // namespace banyan
