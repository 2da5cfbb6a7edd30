#include "core/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "core/text_file.hpp"

namespace banyan {
namespace {

std::string_view type_name(const toml::node& node) {
    switch (node.type()) {
        case toml::node_type::string:
            return "string";
        case toml::node_type::integer:
            return "integer";
        case toml::node_type::floating_point:
            return "float";
        case toml::node_type::boolean:
            return "boolean";
        case toml::node_type::array:
            return "array";
        case toml::node_type::table:
            return "table";
        default:
            return "date/time";
    }
}

}  // namespace

Result<double> parse_duration(std::string_view text) {
    std::string s(text);
    char* end = nullptr;
    errno = 0;
    double value = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || errno != 0 || !std::isfinite(value) || value < 0 || s.find_first_of(" \t") != s.npos)
        return make_error(EINVAL, fmt::format("'{}' is not a duration (expected e.g. 250ms, 30s, 5m, 2h, 1d)", text));
    std::string_view unit(end);
    double scale = 0;
    if (unit.empty() || unit == "s")
        scale = 1;
    else if (unit == "ms")
        scale = 0.001;
    else if (unit == "m")
        scale = 60;
    else if (unit == "h")
        scale = 3600;
    else if (unit == "d")
        scale = 86400;
    else
        return make_error(EINVAL, fmt::format("'{}': unknown unit '{}' (expected ms, s, m, h or d)", text, unit));
    return value * scale;
}

Result<Config> Config::load(const std::string& path) {
    auto text = read_text_file(path);
    if (!text)
        return text.error();
    return parse(*text, path);
}

Result<Config> Config::parse(std::string_view text, std::string source) {
    Config config;
    config.source_ = std::move(source);
    try {
        config.root_ = toml::parse(text, config.source_);
    } catch (const toml::parse_error& e) {
        const auto& where = e.source().begin;
        return make_error(EINVAL,
                          fmt::format("{}:{}:{}: {}", config.source_, where.line, where.column, e.description()));
    }
    return config;
}

Result<void> Config::set_from_text(std::string_view assignment) {
    size_t eq = assignment.find('=');
    if (eq == assignment.npos || eq == 0)
        return make_error(EINVAL, fmt::format("'{}': expected KEY=VALUE", assignment));
    std::string_view key = assignment.substr(0, eq);
    std::string_view value_text = assignment.substr(eq + 1);
    toml::table parsed;
    try {
        parsed = toml::parse(fmt::format("v = {}", value_text));
    } catch (const toml::parse_error&) {
        parsed.insert_or_assign("v", std::string(value_text));
    }
    toml::table* table = &root_;
    size_t start = 0;
    for (size_t dot = key.find('.'); dot != key.npos; dot = key.find('.', start)) {
        std::string_view part = key.substr(start, dot - start);
        if (part.empty())
            return make_error(EINVAL, fmt::format("'{}': empty key part", key));
        auto [it, inserted] = table->emplace<toml::table>(part);
        if (!it->second.is_table())
            return make_error(EINVAL, fmt::format("'{}': {} is not a table", key, key.substr(0, dot)));
        table = it->second.as_table();
        start = dot + 1;
    }
    std::string_view leaf = key.substr(start);
    if (leaf.empty())
        return make_error(EINVAL, fmt::format("'{}': empty key part", key));
    table->insert_or_assign(leaf, std::move(*parsed.get("v")));
    return {};
}

const toml::node* Config::find(std::string_view key) const {
    return root_.at_path(key).node();
}

bool Config::has(std::string_view key) const {
    return find(key) != nullptr;
}

Error Config::wrong(std::string_view key, std::string_view expected, const toml::node& got) const {
    return make_error(EINVAL, fmt::format("{}: {}: expected {}, got {}", source_, key, expected, type_name(got)));
}

Error Config::missing(std::string_view key) const {
    return make_error(EINVAL, fmt::format("{}: {}: required key is missing", source_, key));
}

Result<std::string> Config::get_string(std::string_view key, std::optional<std::string> fallback) const {
    const toml::node* node = find(key);
    if (!node)
        return fallback ? Result<std::string>(*fallback) : Result<std::string>(missing(key));
    if (auto v = node->value<std::string>(); v && node->is_string())
        return *v;
    return wrong(key, "a string", *node);
}

Result<int64_t> Config::get_int(std::string_view key, int64_t min, int64_t max, std::optional<int64_t> fallback) const {
    const toml::node* node = find(key);
    if (!node)
        return fallback ? Result<int64_t>(*fallback) : Result<int64_t>(missing(key));
    std::string expected = fmt::format("an integer in {}-{}", min, max);
    if (!node->is_integer())
        return wrong(key, expected, *node);
    int64_t v = node->as_integer()->get();
    if (v < min || v > max)
        return make_error(ERANGE, fmt::format("{}: {}: expected {}, got {}", source_, key, expected, v));
    return v;
}

Result<bool> Config::get_bool(std::string_view key, std::optional<bool> fallback) const {
    const toml::node* node = find(key);
    if (!node)
        return fallback ? Result<bool>(*fallback) : Result<bool>(missing(key));
    if (!node->is_boolean())
        return wrong(key, "true or false", *node);
    return node->as_boolean()->get();
}

Result<std::vector<std::string>> Config::get_string_array(std::string_view key,
                                                          std::optional<std::vector<std::string>> fallback) const {
    const toml::node* node = find(key);
    if (!node)
        return fallback ? Result<std::vector<std::string>>(*fallback) : Result<std::vector<std::string>>(missing(key));
    if (!node->is_array())
        return wrong(key, "an array of strings", *node);
    std::vector<std::string> out;
    size_t i = 0;
    for (const auto& element : *node->as_array()) {
        if (!element.is_string())
            return wrong(fmt::format("{}[{}]", key, i), "a string", element);
        out.push_back(element.as_string()->get());
        i++;
    }
    return out;
}

Result<std::vector<std::pair<std::string, std::string>>> Config::get_string_table(std::string_view key) const {
    std::vector<std::pair<std::string, std::string>> out;
    const toml::node* node = find(key);
    if (!node)
        return out;
    if (!node->is_table())
        return wrong(key, "a table of strings", *node);
    for (const auto& [name, value] : *node->as_table()) {
        if (!value.is_string())
            return wrong(fmt::format("{}.{}", key, name.str()), "a string", value);
        out.emplace_back(std::string(name.str()), value.as_string()->get());
    }
    return out;
}

Result<std::vector<std::string>> Config::get_keys(std::string_view key) const {
    std::vector<std::string> out;
    const toml::node* node = key.empty() ? &root_ : find(key);
    if (!node)
        return out;
    if (!node->is_table())
        return wrong(key, "a table", *node);
    for (const auto& [name, value] : *node->as_table())
        out.emplace_back(name.str());
    return out;
}

Result<double> Config::get_duration(std::string_view key, std::optional<double> fallback) const {
    const toml::node* node = find(key);
    if (!node)
        return fallback ? Result<double>(*fallback) : Result<double>(missing(key));
    if (node->is_integer() || node->is_floating_point()) {
        double v = node->value<double>().value_or(-1);
        if (v < 0 || !std::isfinite(v))
            return make_error(ERANGE, fmt::format("{}: {}: a duration may not be negative", source_, key));
        return v;
    }
    if (!node->is_string())
        return wrong(key, "a duration (e.g. \"30s\")", *node);
    auto seconds = parse_duration(node->as_string()->get());
    if (!seconds)
        return make_error(EINVAL, fmt::format("{}: {}: {}", source_, key, seconds.error().message));
    return seconds;
}

namespace {

// The allowed name within two edits of `name` (a typo), or "".
std::string_view nearest(std::string_view name, const std::vector<std::string_view>& allowed) {
    std::string_view best;
    size_t best_distance = 3;
    for (auto a : allowed) {
        std::vector<size_t> row(a.size() + 1);
        for (size_t j = 0; j <= a.size(); j++)
            row[j] = j;
        for (size_t i = 1; i <= name.size(); i++) {
            size_t diagonal = row[0];
            row[0] = i;
            for (size_t j = 1; j <= a.size(); j++) {
                size_t above = row[j];
                row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (name[i - 1] == a[j - 1] ? 0 : 1)});
                diagonal = above;
            }
        }
        if (row[a.size()] < best_distance) {
            best_distance = row[a.size()];
            best = a;
        }
    }
    return best;
}

}  // namespace

Result<void> Config::check_keys(std::string_view table, const std::vector<std::string_view>& allowed) const {
    const toml::table* t = &root_;
    if (!table.empty()) {
        const toml::node* node = find(table);
        if (!node)
            return {};
        if (!node->is_table())
            return wrong(table, "a table", *node);
        t = node->as_table();
    }
    for (const auto& [name, value] : *t) {
        bool known = false;
        for (auto a : allowed)
            known = known || a == name.str();
        if (!known) {
            std::string list;
            for (auto a : allowed)
                list += (list.empty() ? "" : ", ") + std::string(a);
            std::string full = table.empty() ? std::string(name.str()) : fmt::format("{}.{}", table, name.str());
            std::string_view near = nearest(name.str(), allowed);
            return make_error(EINVAL, fmt::format("{}: {}: unknown {}{} (expected one of: {})", source_, full,
                                                  table.empty() ? "table" : "key",
                                                  near.empty() ? "" : fmt::format(", did you mean '{}'?", near), list));
        }
    }
    return {};
}

}  // namespace banyan
