// Slurm's names for what Banyan has, where Slurm's tools and mail read
// them (doc/spec/slurm.md): an ended job's state, a duration.
#pragma once

#include <string>
#include <string_view>

namespace banyan {

// An inactive job's state from its result (completed, failed, canceled,
// timeout) and exception type: COMPLETED, CANCELLED, TIMEOUT,
// OUT_OF_MEMORY, NODE_FAIL, PREEMPTED or FAILED.
std::string slurm_ended_state(std::string_view result, std::string_view exception);

// A duration as Slurm prints it: [D-]HH:MM:SS (sacct's Elapsed), or with
// `short_form` hours only when needed (squeue's %M and %l: 5:03, 1:02:03).
std::string slurm_duration(double seconds, bool short_form = false);

}  // namespace banyan
