// Binding: the CPUs and GPUs each local task may use (doc/spec/shell.md
// section 5), from the cores and GPUs R gives this rank.
#pragma once

#include <string>
#include <vector>

#include "core/idset.hpp"
#include "shell/shell_job.hpp"

namespace banyan {

struct TaskBinding {
    std::vector<int> cpus;  // OS CPU numbers; empty: not bound
    std::string gpus;       // CUDA_VISIBLE_DEVICES; empty: not set
};

// `core_cpus[i]`: the OS CPUs of this rank's core i (hwloc logical index,
// as in R); empty when this machine's topology is not known. One binding
// per local task.
std::vector<TaskBinding> task_bindings(const std::vector<std::vector<int>>& core_cpus, const IdSet& cores,
                                       const IdSet& gpus, uint32_t ntasks, Affinity cpu, Affinity gpu);

// This machine's hwloc topology, restricted to the CPUs this process may
// use, as discovery saw it; loaded once per shell and shared with the PMIx
// server. Holds nothing when the topology comes from XML or a synthetic
// description (HWLOC_XMLFILE, HWLOC_SYNTHETIC without HWLOC_THISSYSTEM=1).
class MachineTopology {
  public:
    MachineTopology();
    ~MachineTopology();
    MachineTopology(const MachineTopology&) = delete;
    MachineTopology& operator=(const MachineTopology&) = delete;
    // The hwloc_topology_t, or nullptr.
    void* hwloc() const { return topology_; }
    // The OS CPUs of each core, by hwloc logical index (as in R); empty
    // when there is no topology of this machine: nothing to bind to.
    std::vector<std::vector<int>> core_cpus() const;

  private:
    void* topology_ = nullptr;
};

}  // namespace banyan
