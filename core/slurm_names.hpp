// Slurm's names for what Banyan has, where Slurm's tools and mail read
// them (doc/spec/slurm.md): an ended job's state, a duration.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace banyan {

// An inactive job's state from its result (completed, failed, canceled,
// timeout) and exception type: COMPLETED, CANCELLED, TIMEOUT,
// OUT_OF_MEMORY, NODE_FAIL, PREEMPTED or FAILED.
std::string slurm_ended_state(std::string_view result, std::string_view exception);

// A duration as Slurm prints it: [D-]HH:MM:SS (sacct's Elapsed), or with
// `short_form` hours only when needed (squeue's %M and %l: 5:03, 1:02:03).
std::string slurm_duration(double seconds, bool short_form = false);

// Slurm's --mail-type list (BEGIN,END, in any case) as bits. Error: "TYPE:
// expected ...", TYPE the first that is not one of them.
enum MailEvent : uint8_t {
    kMailBegin = 1,
    kMailEnd = 2,
    kMailFail = 4,
    kMailRequeue = 8,
    kMailInvalidDepend = 16,
    kMailArrayTasks = 32,  // an array's elements mail for themselves
};
Result<uint8_t> slurm_mail_types(std::string_view list);

}  // namespace banyan
