// ArraySpec: a job array's indexes and throttle as `--array` writes them
// (doc/spec/arrays.md §1): "1-100%10", "1,3,5-9:2", "0-99999".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/idset.hpp"
#include "core/result.hpp"

namespace banyan {

struct ArrayLimits {
    uint64_t max_size = 100'000;     // elements in one array (job-manager.max-array-size)
    uint32_t max_index = 9'999'999;  // the largest index (job-manager.max-array-index)
};

struct ArraySpec {
    IdSet indexes;
    uint32_t throttle = 0;  // at most this many elements active at once; 0: no limit

    // Error (EINVAL) names the part that is wrong: an empty list or element,
    // a reversed range, a step of 0, a bad number, an index over
    // `limits.max_index`, more elements than `limits.max_size`, a throttle
    // of 0.
    static Result<ArraySpec> parse(std::string_view text, const ArrayLimits& limits = {});
    // The indexes as an IdSet writes them, and "%T" with a throttle.
    std::string format() const;
};

}  // namespace banyan
