#include "core/duration.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <ctime>
#include <optional>
#include <string>

#include <fmt/format.h>

namespace banyan {
namespace {

Error bad_duration(std::string_view text) {
    return make_error(EINVAL, fmt::format("{}: not a duration (expected N (minutes), Ns, Nm, Nh, Nd or HH:MM:SS)",
                                          text));
}

// A non-negative decimal number filling all of `text`.
std::optional<double> number(std::string_view text) {
    double v = 0;
    if (text.empty() || text.front() == '-' || text.front() == '+')
        return std::nullopt;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
        return std::nullopt;
    return v;
}

}  // namespace

Result<double> parse_duration(std::string_view text, BareNumber bare) {
    if (text.find(':') != std::string_view::npos) {
        double total = 0;
        int fields = 0;
        for (size_t start = 0; fields < 4; fields++) {
            size_t colon = text.find(':', start);
            std::string_view part = text.substr(start, colon == std::string_view::npos ? colon : colon - start);
            auto v = number(part);
            if (!v || (fields > 0 && *v >= 60) || part.find('.') != std::string_view::npos)
                return bad_duration(text);
            total = total * 60 + *v;
            if (colon == std::string_view::npos)
                return fields >= 1 && fields <= 2 ? Result<double>(total) : Result<double>(bad_duration(text));
            start = colon + 1;
        }
        return bad_duration(text);
    }
    double unit = bare == BareNumber::minutes ? 60 : 1;
    std::string_view digits = text;
    if (!text.empty()) {
        switch (text.back()) {
            case 's': unit = 1; break;
            case 'm': unit = 60; break;
            case 'h': unit = 3600; break;
            case 'd': unit = 86400; break;
            default: break;
        }
        if (std::string_view("smhd").find(text.back()) != std::string_view::npos)
            digits.remove_suffix(1);
    }
    auto v = number(digits);
    if (!v)
        return bad_duration(text);
    return *v * unit;
}

namespace {

Error bad_moment(std::string_view text) {
    return make_error(EINVAL, fmt::format("{}: not a time (expected now, +DURATION, @EPOCH, HH:MM[:SS] or "
                                          "YYYY-MM-DD[ HH:MM[:SS]])",
                                          text));
}

// Parses all of `text` with strptime's `format` into `tm`.
bool parse_all(const std::string& text, const char* format, std::tm& tm) {
    const char* end = strptime(text.c_str(), format, &tm);
    return end && *end == '\0';
}

}  // namespace

Result<double> parse_moment(std::string_view text, double now) {
    if (text == "now")
        return now;
    if (text.starts_with('+')) {
        auto d = parse_duration(text.substr(1), BareNumber::seconds);
        if (!d)
            return bad_moment(text);
        return now + *d;
    }
    if (text.starts_with('@')) {
        auto v = number(text.substr(1));
        if (!v)
            return bad_moment(text);
        return *v;
    }
    std::string s(text);
    std::replace(s.begin(), s.end(), 'T', ' ');
    auto t_now = static_cast<std::time_t>(now);
    std::tm tm{};
    localtime_r(&t_now, &tm);
    tm.tm_sec = 0;
    tm.tm_isdst = -1;  // mktime decides
    if (parse_all(s, "%H:%M", tm) || parse_all(s, "%H:%M:%S", tm)) {
        double at = static_cast<double>(std::mktime(&tm));
        if (at <= now) {  // passed today: tomorrow
            tm.tm_mday += 1;
            tm.tm_isdst = -1;
            at = static_cast<double>(std::mktime(&tm));
        }
        return at;
    }
    tm = std::tm{};
    tm.tm_isdst = -1;
    if (parse_all(s, "%Y-%m-%d", tm) || parse_all(s, "%Y-%m-%d %H:%M", tm) || parse_all(s, "%Y-%m-%d %H:%M:%S", tm)) {
        std::time_t at = std::mktime(&tm);
        if (at == static_cast<std::time_t>(-1))
            return bad_moment(text);
        return static_cast<double>(at);
    }
    return bad_moment(text);
}

std::string format_moment(double seconds_since_epoch) {
    auto t = static_cast<std::time_t>(seconds_since_epoch);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    return buf;
}

std::string format_clock(double seconds_since_epoch, double now) {
    auto t = static_cast<std::time_t>(seconds_since_epoch);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, std::abs(seconds_since_epoch - now) < 86400 ? "%H:%M" : "%Y-%m-%d %H:%M", &tm);
    return buf;
}

std::string format_duration(double seconds) {
    auto s = static_cast<int64_t>(std::llround(std::max(seconds, 0.0)));
    if (s < 60)
        return fmt::format("{}s", s);
    if (s < 3600)
        return fmt::format("{}m{:02}s", s / 60, s % 60);
    if (s < 86400)
        return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
    return fmt::format("{}d{}h", s / 86400, s % 86400 / 3600);
}

double wall_now() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace banyan
