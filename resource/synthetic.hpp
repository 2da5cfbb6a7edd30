// Synthetic clusters for simulation and tests: "node[0-16383]: socket:2,
// core:32,gpu:4,memory:256G" (doc/spec/resources.md section 3).
#pragma once

#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "resource/node.hpp"

namespace banyan {

// One description per host, ranks in hostlist order. Error names the part
// that is wrong: the hostlist, an unknown type, a bad count or size.
Result<std::vector<NodeDescription>> parse_synthetic_cluster(std::string_view text);

}  // namespace banyan
