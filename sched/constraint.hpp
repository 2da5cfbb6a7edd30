// Constraint: which nodes a job may run on (Flux RFC 31), and the query
// text users write for one (`banyan submit --requires`, after RFC 35).
// A constraint is a tree: `properties` (all of these names, `^name`: not
// this one), `hostlist`, `ranks`, and `and`/`or`/`not` of constraints.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/idset.hpp"
#include "core/result.hpp"
#include "resource/node.hpp"

namespace banyan {

// Whether a node has the property named.
using PropertyTest = std::function<bool(std::string_view)>;

class Constraint {
  public:
    enum class Op { properties, hostlist, ranks, all_of, any_of, none_of };

    // RFC 31 JSON. Error names the path of the bad part
    // ("constraints.and[1].properties[0]: ...") or the unknown operator.
    static Result<Constraint> from_json(const nlohmann::json& j, const std::string& path = "constraints");
    // Query text to RFC 31 JSON: terms `NAME[,NAME...]` or `property:`,
    // `host:`/`hosts:`, `rank:`/`ranks:` VALUE; `^NAME` negates a property;
    // `not`/`!`/`-TERM`, `and`/`&`/`&&` (or just a space), `or`/`|`/`||`,
    // and parentheses. Error names the token and what was expected.
    static Result<nlohmann::json> parse_query(std::string_view text);

    nlohmann::json to_json() const;
    bool match(std::string_view host, int64_t rank, const PropertyTest& has) const;
    // The term in the query syntax: `gpu`, `^gpu`, `host:node[0-3]`, ...
    std::string describe() const;
    // Whether a `hostlist` (`ranks`) term is anywhere: else match() needs
    // no host (rank).
    bool uses_hosts() const { return uses(Op::hostlist); }
    bool uses_ranks() const { return uses(Op::ranks); }
    // Property names mentioned anywhere (without `^`).
    std::vector<std::string> property_names() const;
    // When no node satisfies the whole (`satisfiable(c)` says whether
    // some node satisfies c), the smallest term that no node satisfies,
    // described; nullopt when some node satisfies the whole.
    std::optional<std::string> unmet_term(const std::function<bool(const Constraint&)>& satisfiable) const;

  private:
    bool uses(Op op) const;
    // `hosts_left`: how many more hosts the whole tree may expand to.
    static Result<Constraint> parse(const nlohmann::json& j, const std::string& path, size_t& hosts_left);

    Op op_ = Op::all_of;
    std::vector<std::string> names_;         // properties: with '^' kept; hostlist: as written
    std::unordered_set<std::string> hosts_;  // hostlist, expanded
    std::vector<IdSet> ranks_;               // ranks
    std::vector<Constraint> children_;       // and, or, not
};

}  // namespace banyan
