#include "core/byte_size.hpp"

#include <cctype>
#include <utility>

#include <fmt/format.h>


namespace banyan {

Result<uint64_t> parse_byte_size(std::string_view text, BareSize bare, uint64_t max) {
    auto bad = [&](std::string_view why) {
        return make_error(EINVAL, fmt::format("'{}': {}", one_line(text), why));
    };
    size_t i = 0;
    uint64_t whole = 0;
    bool digits = false;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, digits = true) {
        if (whole > (max >> 3))  // more digits than any size below max has
            return bad(fmt::format("over the largest size, {}", format_byte_size(max)));
        whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
    }
    // A fraction, for "1.5G": up to 3 digits, so that it times a unit
    // stays within 64 bits.
    uint64_t fraction = 0, scale = 1;
    if (i < text.size() && text[i] == '.') {
        for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, digits = true) {
            if (scale == 1000)
                return bad("at most 3 decimals");
            fraction = fraction * 10 + static_cast<uint64_t>(text[i] - '0');
            scale *= 10;
        }
    }
    if (!digits)
        return bad("expected a size, as 512M or 4G");
    std::string unit;
    for (; i < text.size(); ++i)
        unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
    if (unit.size() > 1 && (unit.substr(1) == "B" || unit.substr(1) == "IB"))
        unit.resize(1);
    int shift = unit == "" || unit == "B" ? 0
                : unit == "K"             ? 10
                : unit == "M"             ? 20
                : unit == "G"             ? 30
                : unit == "T"             ? 40
                : unit == "P"             ? 50
                                          : -1;
    if (shift < 0)
        return bad("unknown unit (expected K, M, G, T or P)");
    if (unit.empty() && bare == BareSize::refused)
        return bad("a size needs a unit: K, M, G or T (as 512M or 4G)");
    if (whole > (max >> shift))
        return bad(fmt::format("over the largest size, {}", format_byte_size(max)));
    // The fraction of one unit, rounded up to a byte.
    uint64_t unit_bytes = uint64_t{1} << shift;
    uint64_t bytes = (whole << shift) + (fraction * unit_bytes + scale - 1) / scale;
    if (bytes == 0)
        return bad("a size must be more than 0");
    if (bytes > max)
        return bad(fmt::format("over the largest size, {}", format_byte_size(max)));
    return bytes;
}

uint64_t bytes_per_unit(std::string_view unit) {
    static constexpr std::pair<std::string_view, int> kUnits[] = {
        {"B", 0},   {"KB", 10}, {"KiB", 10}, {"MB", 20}, {"MiB", 20},
        {"GB", 30}, {"GiB", 30}, {"TB", 40}, {"TiB", 40}};
    for (auto [name, shift] : kUnits)
        if (unit == name)
            return uint64_t{1} << shift;
    return 0;
}

std::string format_byte_size(uint64_t bytes) {
    static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (u < 6 && bytes >= (uint64_t{1} << (10 * (u + 1))))
        ++u;
    if (u == 0)
        return fmt::format("{} B", bytes);
    uint64_t unit = uint64_t{1} << (10 * u);
    // Tenths of the unit, rounded up.
    uint64_t tenths = bytes / unit * 10 + ((bytes % unit) * 10 + unit - 1) / unit;
    if (tenths % 10 == 0)
        return fmt::format("{} {}", tenths / 10, kUnits[u]);
    return fmt::format("{}.{} {}", tenths / 10, tenths % 10, kUnits[u]);
}

}  // namespace banyan
