// Preemption victims (doc/spec/sched.md §9): of the running jobs a
// blocked job may preempt, the fewest without which it fits now.
#pragma once

#include <cstdint>
#include <vector>

#include "sched/matcher.hpp"

namespace banyan {

struct PreemptionCandidate {
    uint64_t id;   // a running job the matcher holds
    int64_t tier;  // of its queue
};

// The candidates, in §9's order (lowest tier, latest start, smallest), are
// taken from the matcher's view one at a time until `job`
// fits at `now`; then, from the last but one back, each it fits without is
// spared. Empty when it would not fit without them all. The matcher holds
// every candidate again afterwards: victims run until they are ended.
std::vector<uint64_t> choose_victims(Matcher& matcher, const Jobspec& job,
                                     std::vector<PreemptionCandidate> candidates, int64_t now);

}  // namespace banyan
