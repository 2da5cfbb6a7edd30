// Shared by the benchmark programs.
#pragma once

#include <sys/resource.h>

namespace banyan {

// This process's peak resident set, in MB.
inline long peak_rss_mb() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024;
}

}  // namespace banyan
