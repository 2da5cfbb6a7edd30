// Logging: one line per record to stderr,
//   "2026-11-21T19:35:01.123Z broker[3] overlay.info: child 5 joined",
// and a ring of the most recent lines that `banyan dmesg` reads back.
// Process-wide (a process has one log); safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/result.hpp"

namespace banyan::log {

enum class Level { error = 0, warning = 1, info = 2, debug = 3 };

struct Options {
    std::string program = "banyan";
    std::optional<uint32_t> rank;    // shown as program[rank]
    Level level = Level::info;       // records above this level skip stderr
    Level ring_level = Level::info;  // and above this one skip the ring
    size_t ring_size = 1000;         // recent lines kept for dmesg
    bool to_stderr = true;
};

void configure(Options options);
// "error", "warning", "info", "debug" (or 0-3).
Result<Level> parse_level(std::string_view text);
std::string_view level_name(Level level);
// True when a record at `level` goes anywhere (stderr or the ring).
bool enabled(Level level);

void write(Level level, std::string_view component, std::string_view text);
// The most recent lines, oldest first.
std::vector<std::string> recent();

template <class... Args>
void error(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    write(Level::error, component, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void warning(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    write(Level::warning, component, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void info(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    if (enabled(Level::info))
        write(Level::info, component, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void debug(std::string_view component, fmt::format_string<Args...> f, Args&&... args) {
    if (enabled(Level::debug))
        write(Level::debug, component, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace banyan::log
