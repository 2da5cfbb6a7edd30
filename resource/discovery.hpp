// Discovery: this node's sockets, cores, GPUs and memory from hwloc,
// restricted to what this process may use (doc/spec/resources.md section 2).
#pragma once

#include <string>

#include "core/result.hpp"
#include "resource/cgroup.hpp"
#include "resource/node.hpp"

namespace banyan {

struct DiscoveryOptions {
    std::string xml_path;   // a hwloc XML file instead of this machine
    std::string synthetic;  // a hwloc synthetic description instead
    // Limits of this machine's cgroup; only applied when the topology is
    // this machine (no XML or synthetic source, here or in HWLOC_XMLFILE /
    // HWLOC_SYNTHETIC).
    std::optional<CgroupLimits> limits;
};

// Error: hwloc cannot load the topology (names the XML file or
// description), or the node has no core left to use.
Result<NodeDescription> discover_node(uint32_t rank, const std::string& hostname, const DiscoveryOptions& options);

// Cuts a description to cgroup limits: at most max_cores cores (lowest ids
// kept), at most max_memory bytes (taken from the last sockets first).
void apply_limits(NodeDescription& node, const CgroupLimits& limits);

}  // namespace banyan
