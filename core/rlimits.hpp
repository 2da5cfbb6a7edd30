// Resource limits by the names `ulimit` and Flux's `-o rlimit.NAME` use:
// the shell knows them all; `banyan submit` sends the submitter's value of
// those marked `propagated` (nproc counts the user's processes node-wide
// and rss is not enforced by Linux: neither goes with a job).
#pragma once

#include <array>

#include <sys/resource.h>

namespace banyan {

struct RlimitName {
    const char* name;
    int resource;
    bool propagated;
};

inline constexpr std::array<RlimitName, 10> kRlimitNames{{{"as", RLIMIT_AS, true},
                                                          {"core", RLIMIT_CORE, true},
                                                          {"cpu", RLIMIT_CPU, true},
                                                          {"data", RLIMIT_DATA, true},
                                                          {"fsize", RLIMIT_FSIZE, true},
                                                          {"memlock", RLIMIT_MEMLOCK, true},
                                                          {"nofile", RLIMIT_NOFILE, true},
                                                          {"nproc", RLIMIT_NPROC, false},
                                                          {"stack", RLIMIT_STACK, true},
                                                          {"rss", RLIMIT_RSS, false}}};

}  // namespace banyan
