// The line format of the simple PMI wire protocol (PMI-1,
// doc/spec/shell.md §4.2), read the same by the shell's server and the
// nested broker's client.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace banyan {

// "cmd=put kvsname=K key=A value=B" -> {cmd: put, kvsname: K, key: A,
// value: B}. `value` (and an abort's `message` or `msg`) runs to the end
// of the line (it may hold spaces and '='); every other word must be
// KEY=VALUE, and `cmd` must be there. nullopt: malformed.
std::optional<std::map<std::string, std::string>> parse_pmi_line(std::string_view line);

}  // namespace banyan
