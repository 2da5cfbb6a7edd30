#include "core/json_parse.hpp"

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace banyan {

namespace {

Error not_json() { return make_error(EPROTO, "not valid JSON"); }
Error too_deep() { return make_error(EPROTO, fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth)); }

// Walks JSON text value by value without building anything.
class Skim {
  public:
    explicit Skim(std::string_view text) : text_(text) {}

    bool at_end() const { return at_ == text_.size(); }
    size_t at() const { return at_; }
    bool too_deep() const { return too_deep_; }

    void space() {
        while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r'))
            ++at_;
    }
    bool eat(char c) {
        if (at_ == text_.size() || text_[at_] != c)
            return false;
        ++at_;
        return true;
    }
    // At a quote: past the closing one.
    bool string() {
        if (!eat('"'))
            return false;
        for (; at_ < text_.size(); ++at_) {
            auto c = static_cast<unsigned char>(text_[at_]);
            if (c == '"') {
                ++at_;
                return true;
            }
            if (c == '\\') {
                if (++at_ == text_.size())
                    return false;
            } else if (c < 0x20) {
                return false;  // a control character must be escaped
            }
        }
        return false;
    }
    // One value, `depth` levels in: a string, an array or object with all
    // it holds, or a scalar's characters (not checked: parsed by its reader).
    bool value(size_t depth) {
        if (at_ == text_.size())
            return false;
        char c = text_[at_];
        if (c == '"')
            return string();
        if (c != '{' && c != '[') {
            size_t from = at_;
            while (at_ < text_.size() && std::string_view(",:}] \t\r\n\"{[").find(text_[at_]) == std::string_view::npos)
                ++at_;
            return at_ > from;
        }
        std::string open;  // the arrays and objects entered, innermost last
        while (at_ < text_.size()) {
            c = text_[at_];
            if (c == '"') {
                if (!string())
                    return false;
                continue;
            }
            if (c == '{' || c == '[') {
                if (depth + open.size() >= kMaxJsonDepth) {
                    too_deep_ = true;
                    return false;
                }
                open.push_back(c);
            } else if (c == '}' || c == ']') {
                if (open.back() != (c == '}' ? '{' : '['))
                    return false;
                open.pop_back();
                if (open.empty()) {
                    ++at_;
                    return true;
                }
            }
            ++at_;
        }
        return false;
    }

  private:
    std::string_view text_;
    size_t at_ = 0;
    bool too_deep_ = false;
};

// The members of the JSON object `text`: keys decoded, values raw.
Result<std::vector<std::pair<std::string, std::string_view>>> json_members(std::string_view text) {
    Skim skim(text);
    std::vector<std::pair<std::string, std::string_view>> members;
    skim.space();
    if (!skim.eat('{'))
        return not_json();
    skim.space();
    if (!skim.eat('}')) {
        for (;;) {
            skim.space();
            size_t key_at = skim.at();
            if (!skim.string())
                return not_json();
            std::string_view quoted = text.substr(key_at, skim.at() - key_at);
            std::string key;
            if (quoted.find('\\') == std::string_view::npos) {
                key = quoted.substr(1, quoted.size() - 2);
            } else {
                auto decoded = parse_json(quoted);
                if (!decoded)
                    return decoded.error();
                key = decoded->get<std::string>();
            }
            skim.space();
            if (!skim.eat(':'))
                return not_json();
            skim.space();
            size_t value_at = skim.at();
            if (!skim.value(1))
                return skim.too_deep() ? too_deep() : not_json();
            members.emplace_back(std::move(key), text.substr(value_at, skim.at() - value_at));
            skim.space();
            if (skim.eat(','))
                continue;
            if (skim.eat('}'))
                break;
            return not_json();
        }
    }
    skim.space();
    if (!skim.at_end())
        return not_json();
    return members;
}

}  // namespace

size_t json_depth(std::string_view text, size_t limit) {
    size_t depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > deepest && (deepest = depth) > limit)
                return limit + 1;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

Result<nlohmann::json> parse_json(std::string_view text) {
    if (json_depth(text) > kMaxJsonDepth)
        return make_error(EPROTO, fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
    auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded())
        return make_error(EPROTO, "not valid JSON");
    return doc;
}

Result<JsonWithRaw> parse_json_except(std::string_view text, std::string_view key) {
    auto members = json_members(text);
    if (!members)
        return members.error();
    JsonWithRaw parsed{nlohmann::json::object(), std::nullopt};
    for (auto& [name, value] : *members) {
        if (name == key) {
            parsed.raw = value;
            continue;
        }
        auto v = parse_json(value);
        if (!v)
            return v.error();
        parsed.rest[name] = std::move(*v);
    }
    return parsed;
}

Result<std::optional<std::string_view>> json_raw_at(std::string_view text,
                                                    std::initializer_list<std::string_view> path) {
    std::optional<std::string_view> value = text;
    for (std::string_view key : path) {
        if (!value->starts_with('{'))
            return std::optional<std::string_view>();
        auto members = json_members(*value);
        if (!members)
            return members.error();
        value.reset();
        for (const auto& [name, raw] : *members)
            if (name == key)
                value = raw;  // the last, as a parser keeps it
        if (!value)
            return value;
    }
    return value;
}

}  // namespace banyan
