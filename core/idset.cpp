#include "core/idset.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace banyan {

Result<uint64_t> parse_decimal(std::string_view text, uint64_t max, std::string_view what) {
    if (text.empty())
        return make_error(EINVAL, fmt::format("{}: empty number", what));
    uint64_t value = 0;
    for (char c : text) {
        if (c < '0' || c > '9')
            return make_error(EINVAL, fmt::format("{}: '{}' is not a number", what, text));
        value = value * 10 + static_cast<uint64_t>(c - '0');
        if (value > max)
            return make_error(ERANGE, fmt::format("{}: {} is above the maximum {}", what, text, max));
    }
    return value;
}

IdSet::IdSet(std::initializer_list<uint32_t> ids) {
    for (uint32_t id : ids)
        insert(id);
}

IdSet IdSet::range(uint32_t first, uint32_t last) {
    IdSet set;
    set.insert_range(first, last);
    return set;
}

Result<IdSet> IdSet::parse(std::string_view text) {
    std::string_view body = text;
    if (!body.empty() && body.front() == '[') {
        if (body.size() < 2 || body.back() != ']')
            return make_error(EINVAL, fmt::format("idset '{}': unbalanced brackets", text));
        body = body.substr(1, body.size() - 2);
    }
    IdSet set;
    if (body.empty())
        return set;
    size_t start = 0;
    while (start <= body.size()) {
        size_t comma = body.find(',', start);
        std::string_view element = body.substr(start, comma == std::string_view::npos ? body.npos : comma - start);
        std::string what = fmt::format("idset '{}'", text);
        if (element.empty())
            return make_error(EINVAL, what + ": empty element (expected e.g. 0-3,7)");
        size_t dash = element.find('-');
        auto first = parse_decimal(element.substr(0, dash), kMaxId, what);
        if (!first)
            return first.error();
        uint64_t last = *first;
        if (dash != std::string_view::npos) {
            auto hi = parse_decimal(element.substr(dash + 1), kMaxId, what);
            if (!hi)
                return hi.error();
            if (*hi < *first)
                return make_error(EINVAL, fmt::format("{}: range '{}' is reversed", what, element));
            last = *hi;
        }
        set.insert_range(static_cast<uint32_t>(*first), static_cast<uint32_t>(last));
        if (comma == std::string_view::npos)
            break;
        start = comma + 1;
    }
    return set;
}

std::string IdSet::format() const {
    std::string out;
    for (const Range& r : ranges_) {
        if (!out.empty())
            out += ',';
        if (r.first == r.last)
            fmt::format_to(std::back_inserter(out), "{}", r.first);
        else
            fmt::format_to(std::back_inserter(out), "{}-{}", r.first, r.last);
    }
    return out;
}

void IdSet::insert_range(uint32_t first, uint32_t last) {
    // Find the first range that ends at or after first-1 (touching merges).
    auto it = std::lower_bound(ranges_.begin(), ranges_.end(), first,
                               [](const Range& r, uint32_t id) { return uint64_t{r.last} + 1 < id; });
    Range merged{first, last};
    auto end = it;
    while (end != ranges_.end() && uint64_t{end->first} <= uint64_t{last} + 1) {
        merged.first = std::min(merged.first, end->first);
        merged.last = std::max(merged.last, end->last);
        ++end;
    }
    it = ranges_.erase(it, end);
    ranges_.insert(it, merged);
}

void IdSet::erase(uint32_t id) {
    auto it =
        std::lower_bound(ranges_.begin(), ranges_.end(), id, [](const Range& r, uint32_t v) { return r.last < v; });
    if (it == ranges_.end() || it->first > id)
        return;
    Range r = *it;
    it = ranges_.erase(it);
    if (id < r.last)
        it = ranges_.insert(it, Range{id + 1, r.last});
    if (id > r.first)
        ranges_.insert(it, Range{r.first, id - 1});
}

bool IdSet::contains(uint32_t id) const {
    auto it =
        std::lower_bound(ranges_.begin(), ranges_.end(), id, [](const Range& r, uint32_t v) { return r.last < v; });
    return it != ranges_.end() && it->first <= id;
}

uint64_t IdSet::count() const {
    uint64_t n = 0;
    for (const Range& r : ranges_)
        n += uint64_t{r.last} - r.first + 1;
    return n;
}

IdSet IdSet::union_with(const IdSet& other) const {
    IdSet out = *this;
    for (const Range& r : other.ranges_)
        out.insert_range(r.first, r.last);
    return out;
}

IdSet IdSet::intersection(const IdSet& other) const {
    IdSet out;
    auto a = ranges_.begin();
    auto b = other.ranges_.begin();
    while (a != ranges_.end() && b != other.ranges_.end()) {
        uint32_t lo = std::max(a->first, b->first);
        uint32_t hi = std::min(a->last, b->last);
        if (lo <= hi)
            out.ranges_.push_back(Range{lo, hi});
        if (a->last < b->last)
            ++a;
        else
            ++b;
    }
    return out;
}

IdSet IdSet::difference(const IdSet& other) const {
    IdSet out;
    auto b = other.ranges_.begin();
    for (Range r : ranges_) {
        uint64_t lo = r.first;
        while (b != other.ranges_.end() && b->last < lo)
            ++b;
        for (auto c = b; c != other.ranges_.end() && c->first <= r.last; ++c) {
            if (c->first > lo)
                out.ranges_.push_back(Range{static_cast<uint32_t>(lo), c->first - 1});
            lo = uint64_t{c->last} + 1;
        }
        if (lo <= r.last)
            out.ranges_.push_back(Range{static_cast<uint32_t>(lo), r.last});
    }
    return out;
}

std::vector<uint32_t> IdSet::ids() const {
    std::vector<uint32_t> out;
    out.reserve(count());
    for_each([&](uint32_t id) { out.push_back(id); });
    return out;
}

}  // namespace banyan
