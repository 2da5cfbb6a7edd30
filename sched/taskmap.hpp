// TaskMap: how many tasks of a job each rank of its R runs, and which task
// ranks they are (doc/spec/shell.md section 2). Every shell of a job
// computes the same map from the jobspec and R.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.hpp"
#include "resource/rv1.hpp"
#include "sched/jobspec.hpp"

namespace banyan {

struct TaskMap {
    struct Block {
        uint32_t rank;        // broker rank
        uint32_t first_task;  // task ranks first_task .. first_task+ntasks-1
        uint32_t ntasks;
        uint32_t nslots;
    };
    std::vector<Block> blocks;  // one per rank of R, in rank order
    uint32_t ntasks = 0;

    // The block of `rank`, or nullptr when R does not hold it.
    const Block* find(uint32_t rank) const;
    // Error names what the jobspec lacks: "jobspec: no slot".
    static Result<TaskMap> compute(const Jobspec& spec, const Rv1& R);
};

}  // namespace banyan
