#include "core/hostlist.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/idset.hpp"

namespace banyan {
namespace {

constexpr uint64_t kMaxHostNumber = 999999999999;  // 12 digits
constexpr size_t kMaxNumberDigits = 12;

bool host_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
}

std::string pad(uint64_t n, size_t width) {
    return fmt::format("{:0{}}", n, width);
}

// Width of a number as written: its length when zero-padded, else 0.
size_t padding_width(std::string_view digits) {
    return digits.size() > 1 && digits.front() == '0' ? digits.size() : 0;
}

// Expands the inside of one bracket group ("1-4,07") into number strings.
Result<std::vector<std::string>> expand_bracket(std::string_view body, std::string_view what, size_t max_hosts) {
    if (body.empty())
        return make_error(EINVAL, fmt::format("{}: empty brackets", what));
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
        size_t comma = body.find(',', start);
        std::string_view element = body.substr(start, comma == body.npos ? body.npos : comma - start);
        if (element.empty())
            return make_error(EINVAL, fmt::format("{}: empty element in brackets", what));
        size_t dash = element.find('-');
        std::string_view lo_text = element.substr(0, dash);
        auto lo = parse_decimal(lo_text, kMaxHostNumber, what);
        if (!lo)
            return lo.error();
        uint64_t hi = *lo;
        if (dash != element.npos) {
            auto h = parse_decimal(element.substr(dash + 1), kMaxHostNumber, what);
            if (!h)
                return h.error();
            if (*h < *lo)
                return make_error(EINVAL, fmt::format("{}: range '{}' is reversed", what, element));
            hi = *h;
        }
        if (hi - *lo + 1 > max_hosts - out.size())
            return make_error(E2BIG, fmt::format("{}: more than {} hosts", what, max_hosts));
        size_t width = padding_width(lo_text);
        for (uint64_t n = *lo; n <= hi; n++)
            out.push_back(pad(n, width));
        if (comma == body.npos)
            break;
        start = comma + 1;
    }
    return out;
}

// Expands one comma-free-at-top-level entry ("r[1-2]n[01-04]") into names.
Result<std::vector<std::string>> expand_entry(std::string_view entry, std::string_view what, size_t budget,
                                              size_t max_hosts) {
    if (entry.empty())
        return make_error(EINVAL, fmt::format("{}: empty host name", what));
    std::vector<std::string> names{""};
    size_t i = 0;
    while (i < entry.size()) {
        if (entry[i] == '[') {
            size_t close = entry.find(']', i);
            if (close == entry.npos)
                return make_error(EINVAL, fmt::format("{}: '[' without ']'", what));
            std::string_view body = entry.substr(i + 1, close - i - 1);
            if (body.find('[') != body.npos)
                return make_error(EINVAL, fmt::format("{}: nested '['", what));
            auto numbers = expand_bracket(body, what, max_hosts);
            if (!numbers)
                return numbers.error();
            if (numbers->size() > budget / names.size())
                return make_error(E2BIG, fmt::format("{}: more than {} hosts", what, max_hosts));
            std::vector<std::string> product;
            product.reserve(names.size() * numbers->size());
            for (const auto& prefix : names)
                for (const auto& n : *numbers)
                    product.push_back(prefix + n);
            names = std::move(product);
            i = close + 1;
            continue;
        }
        // A run of literal characters is appended to every name at once.
        size_t end = i;
        while (end < entry.size() && entry[end] != '[') {
            if (entry[end] == ']')
                return make_error(EINVAL, fmt::format("{}: ']' without '['", what));
            if (!host_char(entry[end]))
                return make_error(EINVAL,
                                  fmt::format("{}: character '{}' is not allowed in a host name", what,
                                              entry[end] == ' ' ? std::string("space") : std::string(1, entry[end])));
            end++;
        }
        for (auto& name : names)
            name.append(entry.substr(i, end - i));
        i = end;
    }
    return names;
}

// A host name split at its trailing number: "node07" -> {"node", "07"}.
struct Split {
    std::string_view prefix;
    std::string_view digits;  // empty when the name has no trailing number
};

Split split_trailing_number(std::string_view host) {
    size_t i = host.size();
    while (i > 0 && host[i - 1] >= '0' && host[i - 1] <= '9')
        i--;
    if (i == host.size() || host.size() - i > kMaxNumberDigits)
        return {host, {}};
    return {host.substr(0, i), host.substr(i)};
}

uint64_t to_number(std::string_view digits) {
    uint64_t n = 0;
    for (char c : digits)
        n = n * 10 + static_cast<uint64_t>(c - '0');
    return n;
}

}  // namespace

Result<HostList> HostList::parse(std::string_view text, size_t max_hosts) {
    max_hosts = std::min(max_hosts, kMaxHosts);
    // Long lists are cut in messages so an error stays one readable line.
    std::string what =
        text.size() > 80 ? fmt::format("hostlist '{}...'", text.substr(0, 77)) : fmt::format("hostlist '{}'", text);
    HostList list;
    if (text.empty())
        return list;
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= text.size(); i++) {
        if (i < text.size()) {
            if (text[i] == '[')
                depth++;
            else if (text[i] == ']')
                depth--;
            if (depth < 0)
                return make_error(EINVAL, fmt::format("{}: ']' without '['", what));
            if (text[i] != ',' || depth > 0)
                continue;
        }
        auto names = expand_entry(text.substr(start, i - start), what, max_hosts - list.size(), max_hosts);
        if (!names)
            return names.error();
        list.hosts_.insert(list.hosts_.end(), names->begin(), names->end());
        start = i + 1;
    }
    return list;
}

std::string HostList::format() const {
    std::string out;
    size_t i = 0;
    while (i < hosts_.size()) {
        Split first = split_trailing_number(hosts_[i]);
        if (!out.empty())
            out += ',';
        if (first.digits.empty()) {
            out += hosts_[i++];
            continue;
        }
        size_t width = padding_width(first.digits);
        // Gather the run of following hosts with the same prefix whose number
        // prints identically at this width, merging consecutive numbers.
        std::vector<std::pair<uint64_t, uint64_t>> ranges;
        size_t j = i;
        for (; j < hosts_.size(); j++) {
            Split s = split_trailing_number(hosts_[j]);
            if (s.digits.empty() || s.prefix != first.prefix)
                break;
            uint64_t n = to_number(s.digits);
            if (pad(n, width) != s.digits)
                break;
            if (!ranges.empty() && ranges.back().second + 1 == n)
                ranges.back().second = n;
            else
                ranges.emplace_back(n, n);
        }
        if (j - i == 1) {
            out += hosts_[i];
        } else {
            out.append(first.prefix);
            out += '[';
            for (size_t r = 0; r < ranges.size(); r++) {
                if (r > 0)
                    out += ',';
                out += pad(ranges[r].first, width);
                if (ranges[r].second != ranges[r].first) {
                    out += '-';
                    out += pad(ranges[r].second, width);
                }
            }
            out += ']';
        }
        i = j;
    }
    return out;
}

std::optional<size_t> HostList::find(std::string_view host) const {
    for (size_t i = 0; i < hosts_.size(); i++)
        if (hosts_[i] == host)
            return i;
    return std::nullopt;
}

}  // namespace banyan
