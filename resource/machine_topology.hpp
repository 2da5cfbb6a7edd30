// This machine's hwloc topology, restricted to the CPUs this process may
// use: what the job shell binds tasks with and hands its PMIx server.
// Discovery reads /sys (2-3 ms here, far more on large nodes), so the exec
// service discovers once and saves it as XML for every shell it starts
// (doc/spec/shell.md section 1).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace banyan {

class MachineTopology {
  public:
    // Discovers it. nullptr when hwloc does not describe this machine
    // (HWLOC_XMLFILE, HWLOC_SYNTHETIC without HWLOC_THISSYSTEM=1): there
    // is nothing to bind to.
    static std::unique_ptr<MachineTopology> discover();
    // Loads what save_xml() wrote on this machine. Error when it cannot.
    static Result<std::unique_ptr<MachineTopology>> load_xml(const std::string& path);
    ~MachineTopology();
    MachineTopology(const MachineTopology&) = delete;
    MachineTopology& operator=(const MachineTopology&) = delete;

    Result<void> save_xml(const std::string& path) const;
    // The hwloc_topology_t.
    void* hwloc() const { return topology_; }
    // The OS CPUs of each core, by hwloc logical index (as in R).
    std::vector<std::vector<int>> core_cpus() const;

  private:
    explicit MachineTopology(void* topology) : topology_(topology) {}
    void* topology_;
};

}  // namespace banyan
