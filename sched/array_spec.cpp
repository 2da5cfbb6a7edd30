#include "sched/array_spec.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace banyan {

Result<ArraySpec> ArraySpec::parse(std::string_view text, const ArrayLimits& limits) {
    auto bad = [&](std::string_view why) { return make_error(EINVAL, fmt::format("'{}': {}", text, why)); };
    ArraySpec spec;
    std::string_view list = text;
    if (size_t percent = text.find('%'); percent != std::string_view::npos) {
        list = text.substr(0, percent);
        auto throttle = parse_decimal(text.substr(percent + 1), UINT32_MAX, "throttle");
        if (!throttle)
            return bad(throttle.error().message);
        if (*throttle == 0)
            return bad("a throttle of 0 would run nothing (expected %1 or more)");
        spec.throttle = static_cast<uint32_t>(*throttle);
    }
    if (list.empty())
        return bad("no indexes (expected e.g. 1-100%10 or 1,3,5-9:2)");
    // Counted as the elements come (an index given twice counts twice), so
    // that a huge range is refused before it is expanded; the ranges are
    // put in the set in order at the end, each an append.
    uint32_t max_index = std::min<uint32_t>(limits.max_index, IdSet::kMaxId);
    uint64_t counted = 0;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        std::string_view element = list.substr(start, comma == std::string_view::npos ? list.npos : comma - start);
        start = comma == std::string_view::npos ? list.size() + 1 : comma + 1;
        if (element.empty())
            return bad("an empty element");
        uint64_t step = 1;
        std::string_view range = element;
        if (size_t colon = element.find(':'); colon != std::string_view::npos) {
            range = element.substr(0, colon);
            if (range.find('-') == std::string_view::npos)
                return bad(fmt::format("a step needs a range ('{}')", element));
            auto s = parse_decimal(element.substr(colon + 1), max_index, "step");
            if (!s)
                return bad(s.error().message);
            if (*s == 0)
                return bad(fmt::format("a step of 0 in '{}'", element));
            step = *s;
        }
        size_t dash = range.find('-');
        auto first = parse_decimal(range.substr(0, dash), UINT32_MAX, "index");
        auto last = dash == std::string_view::npos ? first : parse_decimal(range.substr(dash + 1), UINT32_MAX, "index");
        if (!first || !last)
            return bad((!first ? first : last).error().message);
        if (*last < *first)
            return bad(fmt::format("the range '{}' is reversed", range));
        if (*last > max_index)
            return bad(fmt::format("index {} is over the largest allowed, {} (job-manager.max-array-index)", *last,
                                   max_index));
        counted += (*last - *first) / step + 1;
        if (counted > limits.max_size)
            return bad(fmt::format("more than {} indexes (job-manager.max-array-size)", limits.max_size));
        if (step == 1)
            ranges.emplace_back(static_cast<uint32_t>(*first), static_cast<uint32_t>(*last));
        else
            for (uint64_t i = *first; i <= *last; i += step)
                ranges.emplace_back(static_cast<uint32_t>(i), static_cast<uint32_t>(i));
    }
    std::sort(ranges.begin(), ranges.end());
    for (const auto& [first, last] : ranges)
        spec.indexes.insert_range(first, last);
    return spec;
}

std::string ArraySpec::format() const {
    return throttle ? fmt::format("{}%{}", indexes.format(), throttle) : indexes.format();
}

}  // namespace banyan
