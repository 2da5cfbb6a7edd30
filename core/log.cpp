#include "core/log.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>

namespace banyan::log {
namespace {

struct State {
    std::mutex mutex;
    Options options;
    std::deque<std::string> ring;
};

State& state() {
    static State s;
    return s;
}

std::atomic<int> g_level{static_cast<int>(Level::info)};

std::string timestamp() {
    auto now = std::chrono::system_clock::now();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    return fmt::format("{}.{:03}Z", buf, ms % 1000);
}

}  // namespace

void configure(Options options) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    g_level = static_cast<int>(std::max(options.level, options.ring_level));
    s.options = std::move(options);
    while (s.ring.size() > s.options.ring_size)
        s.ring.pop_front();
}

Result<Level> parse_level(std::string_view text) {
    static constexpr std::string_view names[] = {"error", "warning", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (text == names[i] || text == std::string_view("0123").substr(i, 1))
            return static_cast<Level>(i);
    return make_error(EINVAL, fmt::format("log level '{}': expected error, warning, info or debug", text));
}

std::string_view level_name(Level level) {
    switch (level) {
        case Level::error:
            return "err";
        case Level::warning:
            return "warning";
        case Level::info:
            return "info";
        case Level::debug:
            return "debug";
    }
    return "?";
}

bool enabled(Level level) {
    return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

void write(Level level, std::string_view component, std::string_view text) {
    if (!enabled(level))
        return;
    State& s = state();
    std::lock_guard lock(s.mutex);
    std::string who = s.options.rank ? fmt::format("{}[{}]", s.options.program, *s.options.rank) : s.options.program;
    std::string line = fmt::format("{} {} {}.{}: {}", timestamp(), who, component, level_name(level), text);
    if (s.options.to_stderr && level <= s.options.level) {
        std::fputs(line.c_str(), stderr);
        std::fputc('\n', stderr);
    }
    if (s.options.ring_size > 0 && level <= s.options.ring_level) {
        if (s.ring.size() == s.options.ring_size)
            s.ring.pop_front();
        s.ring.push_back(std::move(line));
    }
}

std::vector<std::string> recent() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    return {s.ring.begin(), s.ring.end()};
}

}  // namespace banyan::log
