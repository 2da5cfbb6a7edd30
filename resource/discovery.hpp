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
    // xml_path is this very machine, exported by export_this_machine():
    // treated as discovered here (the process's CPU binding and `limits`
    // apply), without the cost of discovery.
    bool xml_is_this_machine = false;
    std::string synthetic;  // a hwloc synthetic description instead
    // Limits of this machine's cgroup; only applied when the topology is
    // this machine (no XML or synthetic source, here or in HWLOC_XMLFILE /
    // HWLOC_SYNTHETIC).
    std::optional<CgroupLimits> limits;
};

// Keeps hwloc from loading two plugins Banyan never needs: OpenGL
// displays (the X11 libraries) and libxml2's XML (ICU); hwloc's own XML
// code reads and writes the same files. They were a tenth of each broker's
// start-up and of each job shell's (bench/RESULTS.md, issue 41). Sets an
// environment variable (unless set already) that children inherit: call
// it at the start, before any thread.
void skip_unneeded_hwloc_plugins();

// Loads hwloc's plugins (with their libraries) and keeps them loaded for
// as long as this process lives: what forks brokers (broker/
// fork_brokers.cpp) does it once for them all, where each would open and
// link them again.
void keep_hwloc_plugins_loaded();

// Discovers this machine (all of it: no binding or limits applied) and
// writes it to `path` as hwloc XML, for brokers of one host to load
// instead of each discovering it (banyan start --test-size). Error: hwloc
// cannot load or export it.
Result<void> export_this_machine(const std::string& path);

// Error: hwloc cannot load the topology (names the XML file or
// description), or the node has no core left to use.
Result<NodeDescription> discover_node(uint32_t rank, const std::string& hostname, const DiscoveryOptions& options);

// Cuts a description to cgroup limits: at most max_cores cores (lowest ids
// kept), at most max_memory bytes (taken from the last sockets first).
void apply_limits(NodeDescription& node, const CgroupLimits& limits);

}  // namespace banyan
