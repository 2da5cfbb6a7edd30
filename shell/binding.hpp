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

}  // namespace banyan
