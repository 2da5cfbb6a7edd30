// GRUG: Fluxion's GraphML recipes for resource graphs
// (doc/spec/resources.md section 6). Only the containment subsystem is
// generated.
#pragma once

#include <string_view>

#include "core/result.hpp"
#include "resource/graph.hpp"

namespace banyan {

// Error names what is wrong: bad XML, no root vertex, an edge to an unknown
// vertex, a bad number.
Result<ResourceGraph> read_grug(std::string_view xml);

}  // namespace banyan
