// JobArray: what the job manager keeps of a job array (doc/spec/arrays.md)
// beside its Job: the indexes still to make, the throttle, and counts.
// Its elements are jobs of their own, made one at a time; an index not
// yet made costs nothing here but its place in an IdSet range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/idset.hpp"
#include "core/result.hpp"
#include "sched/array_spec.hpp"

namespace banyan {

struct JobArray {
    // From the jobspec (attributes.system.array): every index, and at most
    // how many elements are active at once (0: no limit).
    IdSet indexes;
    uint64_t size = 0;  // indexes.count()
    uint32_t throttle = 0;
    // From the array's eventlog. Indexes are made lowest first: those below
    // `next` are made or canceled; `canceled` holds the indexes canceled
    // before they were made (event `element-canceled`).
    uint32_t next = 0;
    bool all_made = false;  // `next` passed the last index
    IdSet canceled;
    uint64_t made = 0;
    // The made elements still known (not purged): index -> job id.
    std::unordered_map<uint32_t, uint64_t> elements;
    bool updated = false;  // its name, time limit or queue changed (event `update`): elements made since take them
    IdSet not_ok;                // made elements that ended other than completed (event `element-end`)
    std::string first_not_ok;    // "fA[7] failed: exit 1", for the array's own end
    // Live, not events (counted again at a restart): elements made and not
    // yet inactive, and of those the ones not yet running.
    uint64_t active = 0;
    uint64_t pending = 0;
    // While elements remain to be made: the jobspec as stored and its
    // signature, each element's own (an element runs the array's jobspec,
    // so banyan-imp checks the user's signature of it unchanged).
    std::string jobspec;
    std::string signature;

    // `text` as --array writes it (sched/array_spec.hpp) within `limits`.
    static Result<JobArray> parse(std::string_view text, const ArrayLimits& limits);
    // The lowest index not yet made nor canceled, if any.
    std::optional<uint32_t> next_to_make() const;
    // Whether `index` is one still to make.
    bool will_make(uint32_t index) const;
    // The indexes still to make (for listings).
    IdSet to_make() const;
    // Event `element`: index `index` was made.
    void made_index(uint32_t index);
};

}  // namespace banyan
