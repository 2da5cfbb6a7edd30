// The overlay protocol's version (doc/spec/overlay.md §3.1): what brokers
// of different builds may expect of each other.
#pragma once

#include <cstdint>

namespace banyan {

// Raised whenever a message between brokers changes, or a broker starts to
// rely on something an older one does not do; the table in overlay.md
// §3.1 says what each version added. Brokers interoperate when their
// versions are at most one apart.
inline constexpr uint32_t kProtocolVersion = 3;

inline bool protocols_interoperate(uint32_t a, uint32_t b) {
    return a <= b + 1 && b <= a + 1;
}

// SHUTDOWN's control_status (protocol 2): the subtree leaves its jobs'
// shells running, to be re-attached.
inline constexpr uint32_t kShutdownKeepsJobs = 1;

}  // namespace banyan
