#include "sched/constraint.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/hostlist.hpp"

namespace banyan {

namespace {

constexpr std::string_view kOperators = "properties, hostlist, ranks, and, or, not";
constexpr size_t kMaxConstraintHosts = 65536;

bool is_space(char c) {
    return std::isspace(static_cast<unsigned char>(c)) != 0;
}

}  // namespace

Result<Constraint> Constraint::from_json(const nlohmann::json& j, const std::string& path) {
    size_t hosts_left = kMaxConstraintHosts;
    return parse(j, path, hosts_left);
}

Result<Constraint> Constraint::parse(const nlohmann::json& j, const std::string& path, size_t& hosts_left) {
    if (!j.is_object() || j.size() != 1)
        return make_error(EINVAL, fmt::format("{}: expected an object with one operator ({})", path, kOperators));
    // (Not `*j.items().begin()`: that proxy is a temporary, and the key it
    // hands out dangles once the statement ends; found by fuzz_constraint.)
    auto only = j.begin();
    const std::string& key = only.key();
    const nlohmann::json& value = only.value();
    std::string at = fmt::format("{}.{}", path, key);
    if (!value.is_array())
        return make_error(EINVAL, fmt::format("{}: expected an array", at));
    Constraint c;
    if (key == "properties" || key == "hostlist" || key == "ranks") {
        c.op_ = key == "properties" ? Op::properties : key == "hostlist" ? Op::hostlist : Op::ranks;
        for (size_t i = 0; i < value.size(); ++i) {
            std::string item_at = fmt::format("{}[{}]", at, i);
            if (!value[i].is_string())
                return make_error(EINVAL, fmt::format("{}: expected a string", item_at));
            auto text = value[i].get<std::string>();
            if (c.op_ == Op::properties) {
                std::string_view name = text;
                if (!name.empty() && name.front() == '^')
                    name.remove_prefix(1);
                if (auto ok = check_property_name(name); !ok)
                    return make_error(EINVAL, fmt::format("{}: {}", item_at, ok.error().message));
            } else if (c.op_ == Op::hostlist) {
                // Expanded for matching: a bound on what one constraint may
                // make rank 0 hold, far above any cluster's host count.
                auto hosts = HostList::parse(text, kMaxConstraintHosts);
                if (!hosts || hosts->size() > hosts_left)
                    return make_error(EINVAL, fmt::format("{}: {}", item_at,
                                                          hosts ? fmt::format("a constraint may name at most {} hosts",
                                                                              kMaxConstraintHosts)
                                                                : hosts.error().message));
                hosts_left -= hosts->size();
                c.hosts_.insert(hosts->begin(), hosts->end());
            } else {
                auto ranks = IdSet::parse(text);
                if (!ranks)
                    return make_error(EINVAL, fmt::format("{}: {}", item_at, ranks.error().message));
                c.ranks_.push_back(*ranks);
            }
            c.names_.push_back(std::move(text));
        }
        return c;
    }
    if (key == "and" || key == "or" || key == "not") {
        c.op_ = key == "and" ? Op::all_of : key == "or" ? Op::any_of : Op::none_of;
        for (size_t i = 0; i < value.size(); ++i) {
            auto child = parse(value[i], fmt::format("{}[{}]", at, i), hosts_left);
            if (!child)
                return child.error();
            c.children_.push_back(std::move(*child));
        }
        return c;
    }
    return make_error(EINVAL, fmt::format("{}: unknown operator '{}' (known: {})", path, key, kOperators));
}

namespace {

// A recursive-descent reader of the query text.
class QueryReader {
  public:
    explicit QueryReader(std::string_view text) {
        std::string word;
        auto flush = [&] {
            if (!word.empty())
                tokens_.push_back(std::move(word));
            word.clear();
        };
        for (char c : text) {
            if (is_space(c)) {
                flush();
            } else if (c == '(' || c == ')') {
                flush();
                tokens_.emplace_back(1, c);
            } else {
                word += c;
            }
        }
        flush();
    }

    Result<nlohmann::json> read() {
        if (tokens_.empty())
            return make_error(EINVAL, "an empty constraint");
        auto e = read_or();
        if (!e)
            return e;
        if (at_ < tokens_.size())
            return make_error(EINVAL, fmt::format("'{}': expected and, or or the end", tokens_[at_]));
        return e;
    }

    // A word the query reads as an operator, not as a property's name.
    static bool is_keyword(const std::string& t) { return is_or(t) || is_and(t) || is_not(t); }

  private:
    static bool is_or(const std::string& t) { return t == "or" || t == "|" || t == "||"; }
    static bool is_and(const std::string& t) { return t == "and" || t == "&" || t == "&&"; }
    static bool is_not(const std::string& t) { return t == "not" || t == "!"; }

    // Joins terms under `op`, flattening nested ones of the same kind.
    static nlohmann::json join(const char* op, std::vector<nlohmann::json> terms) {
        if (terms.size() == 1)
            return std::move(terms.front());
        nlohmann::json all = nlohmann::json::array();
        for (auto& t : terms) {
            if (t.contains(op))
                for (auto& inner : t[op])
                    all.push_back(std::move(inner));
            else
                all.push_back(std::move(t));
        }
        return {{op, std::move(all)}};
    }

    Result<nlohmann::json> read_or() {
        std::vector<nlohmann::json> terms;
        for (;;) {
            auto t = read_and();
            if (!t)
                return t;
            terms.push_back(std::move(*t));
            if (at_ < tokens_.size() && is_or(tokens_[at_])) {
                ++at_;
                continue;
            }
            return join("or", std::move(terms));
        }
    }

    Result<nlohmann::json> read_and() {
        std::vector<nlohmann::json> terms;
        for (;;) {
            auto t = read_unary();
            if (!t)
                return t;
            terms.push_back(std::move(*t));
            if (at_ < tokens_.size() && is_and(tokens_[at_])) {
                ++at_;
                continue;
            }
            // Terms side by side are joined by and.
            if (at_ < tokens_.size() && !is_or(tokens_[at_]) && tokens_[at_] != ")")
                continue;
            return join("and", std::move(terms));
        }
    }

    Result<nlohmann::json> read_unary() {
        if (at_ >= tokens_.size())
            return make_error(EINVAL, "the constraint ends where a term was expected");
        const std::string& t = tokens_[at_];
        if (is_not(t)) {
            ++at_;
            auto inner = read_unary();
            if (!inner)
                return inner;
            return nlohmann::json{{"not", nlohmann::json::array({std::move(*inner)})}};
        }
        if (t == "(") {
            ++at_;
            auto inner = read_or();
            if (!inner)
                return inner;
            if (at_ >= tokens_.size() || tokens_[at_] != ")")
                return make_error(EINVAL, "a '(' is not closed");
            ++at_;
            return inner;
        }
        if (t == ")" || is_and(t) || is_or(t))
            return make_error(EINVAL, fmt::format("'{}': expected a term", t));
        ++at_;
        if (t.size() > 1 && (t.front() == '-' || t.front() == '!')) {
            auto inner = term(t.substr(1));
            if (!inner)
                return inner;
            return nlohmann::json{{"not", nlohmann::json::array({std::move(*inner)})}};
        }
        return term(t);
    }

    static Result<nlohmann::json> term(const std::string& t) {
        std::string op = "property", value = t;
        if (auto colon = t.find(':'); colon != std::string::npos) {
            op = t.substr(0, colon);
            value = t.substr(colon + 1);
        }
        if (value.empty())
            return make_error(EINVAL, fmt::format("'{}': no value after '{}:'", t, op));
        if (op == "property" || op == "properties") {
            nlohmann::json names = nlohmann::json::array();
            for (size_t at = 0; at <= value.size();) {
                size_t comma = std::min(value.find(',', at), value.size());
                std::string name = value.substr(at, comma - at);
                std::string_view bare = name;
                if (!bare.empty() && bare.front() == '^')
                    bare.remove_prefix(1);
                if (auto ok = check_property_name(bare); !ok)
                    return make_error(EINVAL, fmt::format("'{}': {}", t, ok.error().message));
                names.push_back(std::move(name));
                at = comma + 1;
            }
            return nlohmann::json{{"properties", std::move(names)}};
        }
        if (op == "host" || op == "hosts") {
            if (auto hosts = HostList::parse(value); !hosts)
                return make_error(EINVAL, fmt::format("'{}': {}", t, hosts.error().message));
            return nlohmann::json{{"hostlist", {value}}};
        }
        if (op == "rank" || op == "ranks") {
            if (auto ranks = IdSet::parse(value); !ranks)
                return make_error(EINVAL, fmt::format("'{}': {}", t, ranks.error().message));
            return nlohmann::json{{"ranks", {value}}};
        }
        return make_error(
            EINVAL, fmt::format("'{}': unknown operator '{}' (known: property, host, hosts, rank, ranks)", t, op));
    }

    std::vector<std::string> tokens_;
    size_t at_ = 0;
};

}  // namespace

Result<nlohmann::json> Constraint::parse_query(std::string_view text) {
    return QueryReader(text).read();
}

nlohmann::json Constraint::to_json() const {
    switch (op_) {
        case Op::properties:
            return {{"properties", names_}};
        case Op::hostlist:
            return {{"hostlist", names_}};
        case Op::ranks:
            return {{"ranks", names_}};
        default: {
            nlohmann::json all = nlohmann::json::array();
            for (const auto& c : children_)
                all.push_back(c.to_json());
            return {{op_ == Op::all_of ? "and" : op_ == Op::any_of ? "or" : "not", std::move(all)}};
        }
    }
}

bool Constraint::match(std::string_view host, int64_t rank, const PropertyTest& has) const {
    auto all = [&] {
        return std::all_of(children_.begin(), children_.end(),
                           [&](const Constraint& c) { return c.match(host, rank, has); });
    };
    switch (op_) {
        case Op::properties:
            return std::all_of(names_.begin(), names_.end(), [&](const std::string& n) {
                return n.front() == '^' ? !has(std::string_view(n).substr(1)) : has(n);
            });
        case Op::hostlist:
            return hosts_.count(std::string(host)) > 0;
        case Op::ranks:
            return rank >= 0 && std::any_of(ranks_.begin(), ranks_.end(), [&](const IdSet& s) {
                       return rank <= UINT32_MAX && s.contains(static_cast<uint32_t>(rank));
                   });
        case Op::all_of:
            return all();
        case Op::any_of:
            return std::any_of(children_.begin(), children_.end(),
                               [&](const Constraint& c) { return c.match(host, rank, has); });
        case Op::none_of:
            return !all();
    }
    return false;
}

std::string Constraint::describe() const {
    auto joined = [&](const char* sep) {
        std::vector<std::string> parts;
        for (const auto& c : children_)
            parts.push_back(c.children_.size() > 1 ? "(" + c.describe() + ")" : c.describe());
        return fmt::format("{}", fmt::join(parts, sep));
    };
    switch (op_) {
        case Op::properties: {
            // Bare, unless a name would read as something else: a keyword
            // (and, or, not, &, |, !), a negation (!name) or an operator
            // (name:value).
            bool bare = std::none_of(names_.begin(), names_.end(), [](const std::string& n) {
                std::string_view name = n.front() == '^' ? std::string_view(n).substr(1) : std::string_view(n);
                return QueryReader::is_keyword(n) || name.front() == '!' || n.find(':') != std::string::npos;
            });
            return fmt::format("{}{}", bare ? "" : "property:", fmt::join(names_, ","));
        }
        case Op::hostlist:
            return fmt::format("host:{}", fmt::join(names_, ","));
        case Op::ranks:
            return fmt::format("rank:{}", fmt::join(names_, ","));
        case Op::all_of:
            return joined(" and ");
        case Op::any_of:
            return joined(" or ");
        case Op::none_of:
            return children_.size() > 1 ? "not (" + joined(" and ") + ")" : "not " + joined("");
    }
    return {};
}

bool Constraint::uses(Op op) const {
    return op_ == op ||
           std::any_of(children_.begin(), children_.end(), [op](const Constraint& c) { return c.uses(op); });
}

std::vector<std::string> Constraint::property_names() const {
    std::vector<std::string> out;
    if (op_ == Op::properties)
        for (const auto& n : names_)
            out.push_back(n.front() == '^' ? n.substr(1) : n);
    for (const auto& c : children_)
        for (auto& n : c.property_names())
            out.push_back(std::move(n));
    return out;
}

std::optional<std::string> Constraint::unmet_term(const std::function<bool(const Constraint&)>& satisfiable) const {
    if (satisfiable(*this))
        return std::nullopt;
    if (op_ == Op::all_of)
        for (const auto& c : children_)
            if (auto term = c.unmet_term(satisfiable))
                return term;
    if (op_ == Op::properties && names_.size() > 1)
        for (const auto& n : names_) {
            Constraint one;
            one.op_ = Op::properties;
            one.names_ = {n};
            if (!satisfiable(one))
                return n;
        }
    return describe();
}

}  // namespace banyan
