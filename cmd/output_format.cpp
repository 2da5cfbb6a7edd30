#include "cmd/output_format.hpp"

#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cmd/cli_util.hpp"
#include "core/idset.hpp"

namespace banyan::cli {

OutputFormat::OutputFormat(const std::string& format, const std::set<std::string>& known) {
    Segment cur;
    for (size_t i = 0; i < format.size();) {
        if (format[i] != '{') {
            cur.literal += format[i++];
            continue;
        }
        size_t close = format.find('}', i);
        if (close == std::string::npos)
            fail(fmt::format("-o {}: '{{' without '}}'", format));
        std::string spec = format.substr(i + 1, close - i - 1);
        auto colon = spec.find(':');
        cur.field = spec.substr(0, colon);
        if (!known.count(cur.field))
            fail(fmt::format("-o: unknown field {{{}}} (known: {{{}}})", cur.field, fmt::join(known, "}, {")));
        if (colon != std::string::npos) {
            std::string w = spec.substr(colon + 1);
            if (!w.empty() && (w[0] == '<' || w[0] == '>' || w[0] == '^')) {
                cur.align = w[0];
                w.erase(0, 1);
            }
            auto dot = w.find('.');
            auto width = parse_decimal(w.substr(0, dot), 1000, "width");
            auto precision = dot == std::string::npos ? Result<uint64_t>(uint64_t{std::string::npos})
                                                      : parse_decimal(w.substr(dot + 1), 1000, "precision");
            if ((!w.substr(0, dot).empty() && !width) || !precision)
                fail(fmt::format("-o: {{{}}}: expected {{{}:[<>^]WIDTH[.MAX]}}", spec, cur.field));
            cur.width = w.substr(0, dot).empty() ? 0 : static_cast<size_t>(*width);
            cur.precision = static_cast<size_t>(*precision);
        }
        segments_.push_back(std::move(cur));
        cur = Segment{};
        i = close + 1;
    }
    if (!cur.literal.empty())
        segments_.push_back(std::move(cur));
}

void OutputFormat::append_padded(std::string& out, std::string value, const Segment& s) {
    if (value.size() > s.precision)
        value.resize(s.precision);
    size_t pad = s.width > value.size() ? s.width - value.size() : 0;
    size_t left = s.align == '>' ? pad : s.align == '^' ? pad / 2 : 0;
    out.append(left, ' ');
    out += value;
    out.append(pad - left, ' ');
}

std::string OutputFormat::render(const std::function<std::string(const std::string&)>& value_of) const {
    std::string out;
    for (const auto& s : segments_) {
        out += s.literal;
        if (!s.field.empty())
            append_padded(out, value_of(s.field), s);
    }
    while (!out.empty() && out.back() == ' ')
        out.pop_back();
    return out;
}

std::string OutputFormat::header(const std::function<std::string(const std::string&)>& title_of) const {
    std::string out;
    for (const auto& s : segments_) {
        out += s.literal;
        if (s.field.empty())
            continue;
        std::string title;
        for (char c : title_of ? title_of(s.field) : s.field)
            title += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        append_padded(out, title, s);
    }
    while (!out.empty() && out.back() == ' ')
        out.pop_back();
    return out;
}

std::string OutputFormat::parsable(const std::function<std::string(const std::string&)>& value_of,
                                   const std::string& delimiter) const {
    std::string out;
    bool first = true;
    for (const auto& s : segments_) {
        if (s.field.empty())
            continue;
        if (!first)
            out += delimiter;
        first = false;
        out += value_of(s.field);
    }
    return out;
}

bool OutputFormat::has(const std::string& field) const {
    for (const auto& s : segments_)
        if (s.field == field)
            return true;
    return false;
}

}  // namespace banyan::cli
