// Job ids: 64-bit, time-ordered, unique across restarts of an instance
// (doc/spec/jobs.md section 1). Printed in a short base58 form with an `f`
// prefix ("f2Ubq7dL"); read back from that form or from decimal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace banyan {

using JobId = uint64_t;

// "f" + base58 of the id.
std::string format_jobid(JobId id);
// Accepts fBASE58 (or the Unicode ƒ prefix), or decimal. Error names the text.
Result<JobId> parse_jobid(std::string_view text);

// A job as a user names it: a job id, or one element of a job array,
// ID[INDEX] (doc/spec/arrays.md §2).
struct JobRef {
    JobId id = 0;
    std::optional<uint32_t> index;
};
Result<JobRef> parse_job_ref(std::string_view text);
// "fA[7]": element 7 of array fA.
std::string format_element(JobId array, uint32_t index);

// Makes ids: 40 bits of milliseconds since 2025-01-01 UTC, then 24 bits of
// sequence within that millisecond. Never goes back in time: ids stay
// ordered and unique if the clock steps back or more than 2^24 are made in
// one millisecond (the time part then runs ahead of the clock).
class JobIdGenerator {
  public:
    // `after`: the largest id ever issued (0 for none); new ids are greater.
    explicit JobIdGenerator(JobId after = 0);
    JobId next(uint64_t now_ms);
    JobId next();  // with the system clock

    static uint64_t epoch_ms(JobId id);  // the time part, as Unix milliseconds

  private:
    uint64_t last_ms_ = 0;
    uint64_t sequence_ = 0;
};

}  // namespace banyan
