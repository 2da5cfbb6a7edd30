#include "core/json_parse.hpp"

#include <string>
#include <utility>

#include <fmt/format.h>

namespace banyan {

namespace {

Error not_json() {
    return make_error(EPROTO, "not valid JSON");
}
Error too_deep() {
    return make_error(EPROTO, fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
}

// Walks JSON text value by value without building anything.
class Skim {
  public:
    explicit Skim(std::string_view text) : text_(text) {}

    bool at_end() const { return at_ == text_.size(); }
    bool peek(char c) const { return at_ < text_.size() && text_[at_] == c; }
    size_t at() const { return at_; }
    bool too_deep() const { return too_deep_; }

    void space() {
        while (at_ < text_.size() &&
               (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r'))
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

    // An object, `depth` levels in counting itself: each member's key
    // (decoded) goes to on_member(key, depth), which reads its value.
    template <class OnMember>
    bool object(size_t depth, OnMember&& on_member) {
        if (!eat('{'))
            return false;
        if (depth > kMaxJsonDepth) {
            too_deep_ = true;
            return false;
        }
        space();
        if (eat('}'))
            return true;
        for (;;) {
            space();
            std::string key;
            if (!key_string(key))
                return false;
            space();
            if (!eat(':'))
                return false;
            space();
            if (!on_member(std::move(key), depth))
                return false;
            space();
            if (eat(','))
                continue;
            return eat('}');
        }
    }

  private:
    bool key_string(std::string& key) {
        size_t from = at_;
        if (!string())
            return false;
        std::string_view quoted = text_.substr(from, at_ - from);
        if (quoted.find('\\') == std::string_view::npos) {
            key = quoted.substr(1, quoted.size() - 2);
            return true;
        }
        auto decoded = parse_json(quoted);  // (an escape: rare in a key)
        if (!decoded)
            return false;
        key = decoded->get<std::string>();
        return true;
    }

    std::string_view text_;
    size_t at_ = 0;
    bool too_deep_ = false;
};

Error skim_error(const Skim& skim) {
    return skim.too_deep() ? too_deep() : not_json();
}

// Within the object at the skim's position, the value at path [key, end):
// each byte is read once, the path followed as it is met.
bool find_path(Skim& skim, std::string_view text, const std::string_view* key, const std::string_view* end,
               size_t depth, std::optional<std::string_view>& found) {
    return skim.object(depth, [&](const std::string& name, size_t level) {
        if (name != *key)
            return skim.value(level);
        found.reset();  // of a repeated key, the last counts
        if (key + 1 != end && skim.peek('{'))
            return find_path(skim, text, key + 1, end, level + 1, found);
        size_t at = skim.at();
        if (!skim.value(level))
            return false;
        if (key + 1 == end)
            found = text.substr(at, skim.at() - at);
        return true;
    });
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
    // nlohmann's parser stops at a NUL byte as at the end of the text, and
    // would take what comes before it, whatever follows (found by
    // fuzz_json_scan): no JSON text holds one (in a string it is escaped).
    if (text.find('\0') != std::string_view::npos)
        return make_error(EPROTO, "not valid JSON");
    if (json_depth(text) > kMaxJsonDepth)
        return make_error(EPROTO, fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
    auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded())
        return make_error(EPROTO, "not valid JSON");
    return doc;
}

Result<JsonWithRaw> parse_json_except(std::string_view text, std::string_view key) {
    JsonWithRaw parsed{nlohmann::json::object(), std::nullopt};
    std::optional<Error> bad_member;
    Skim skim(text);
    skim.space();
    bool read = skim.object(1, [&](std::string name, size_t depth) {
        size_t at = skim.at();
        if (!skim.value(depth))
            return false;
        std::string_view value = text.substr(at, skim.at() - at);
        if (name == key) {
            parsed.raw = value;  // of a repeated key, the last counts
            return true;
        }
        auto v = parse_json(value);
        if (!v)
            bad_member = v.error();
        else
            parsed.rest[name] = std::move(*v);
        return v.ok();
    });
    skim.space();
    if (bad_member)
        return *bad_member;
    if (!read || !skim.at_end())
        return skim_error(skim);
    return parsed;
}

Result<std::optional<std::string_view>> json_raw_at(std::string_view text,
                                                    std::initializer_list<std::string_view> path) {
    if (path.size() == 0)
        return std::optional<std::string_view>(text);
    Skim skim(text);
    skim.space();
    std::optional<std::string_view> found;
    if (!skim.peek('{'))
        return found;
    bool read = find_path(skim, text, path.begin(), path.end(), 1, found);
    skim.space();
    if (!read || !skim.at_end())
        return skim_error(skim);
    return found;
}

Result<void> json_array_items(std::string_view text, std::vector<std::string_view>& items) {
    items.clear();
    Skim skim(text);
    skim.space();
    if (!skim.eat('['))
        return not_json();
    skim.space();
    if (!skim.eat(']')) {
        for (;;) {
            skim.space();
            size_t at = skim.at();
            if (!skim.value(1))
                return skim_error(skim);
            items.push_back(text.substr(at, skim.at() - at));
            skim.space();
            if (skim.eat(']'))
                break;
            if (!skim.eat(','))
                return not_json();
        }
    }
    skim.space();
    if (!skim.at_end())
        return not_json();
    return {};
}

}  // namespace banyan
