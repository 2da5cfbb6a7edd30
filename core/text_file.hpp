// read_text_file: a whole file as a string. Error: "PATH: cannot read: REASON".
#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

#include "core/result.hpp"

namespace banyan {

Result<std::string> read_text_file(const std::string& path);

// The process ids a kernel file lists, separated by white space (a
// cgroup's cgroup.procs, /proc/PID/task/TID/children); none when it cannot
// be read (the cgroup or task is gone).
std::vector<pid_t> read_pid_list(const std::string& path);

}  // namespace banyan
