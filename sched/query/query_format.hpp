// How banyan-sched-query prints a match: Fluxion resource-query's formats
// (doc/man/banyan-sched-query.md), so that the two tools can be diffed.
#pragma once

#include <span>
#include <string>

#include "sched/matcher.hpp"

namespace banyan {

enum class QueryFormat { simple, pretty_simple, jgf, rv1, rv1_nosched };
Result<QueryFormat> query_format_from_name(std::string_view name);

// The shown claims: `simple` one line per vertex in postorder, six spaces,
// "---" per level, NAME[COUNT:x|s]; `pretty_simple` the same in preorder
// with exclusive/shared; `jgf` the claims as a graph; `rv1` R v1 with the
// graph under "scheduling"; `rv1_nosched` R v1 alone.
std::string format_claims(const Matcher& matcher, std::span<const Claim> claims, int64_t start, int64_t end,
                          QueryFormat format);

// The claims as JSON Graph Format: vertices with their paths, containment edges.
nlohmann::json claims_to_jgf(const ResourcePool& pool, std::span<const Claim> claims);

}  // namespace banyan
