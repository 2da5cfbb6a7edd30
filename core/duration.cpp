#include "core/duration.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <optional>

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

}  // namespace banyan
