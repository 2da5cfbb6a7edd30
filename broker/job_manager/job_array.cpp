#include "broker/job_manager/job_array.hpp"

#include <algorithm>

namespace banyan {

Result<JobArray> JobArray::parse(std::string_view text, const ArrayLimits& limits) {
    auto spec = ArraySpec::parse(text, limits);
    if (!spec)
        return spec.error();
    JobArray array;
    array.indexes = std::move(spec->indexes);
    array.size = array.indexes.count();
    array.throttle = spec->throttle;
    array.next = array.indexes.first();
    return array;
}

std::optional<uint32_t> JobArray::next_to_make() const {
    if (all_made)
        return std::nullopt;
    const auto& ranges = indexes.ranges();
    // The first range that reaches `next` (ranges are sorted and apart).
    auto r = std::lower_bound(ranges.begin(), ranges.end(), next,
                              [](const IdSet::Range& range, uint32_t id) { return range.last < id; });
    const auto& holes = canceled.ranges();
    for (; r != ranges.end(); ++r)
        for (uint64_t i = std::max(r->first, next); i <= r->last;) {
            // Past a run of canceled indexes in one step.
            auto hole = std::lower_bound(holes.begin(), holes.end(), i,
                                         [](const IdSet::Range& h, uint64_t id) { return h.last < id; });
            if (hole == holes.end() || hole->first > i)
                return static_cast<uint32_t>(i);
            i = uint64_t{hole->last} + 1;
        }
    return std::nullopt;
}

bool JobArray::will_make(uint32_t index) const {
    return !all_made && index >= next && indexes.contains(index) && !canceled.contains(index);
}

IdSet JobArray::to_make() const {
    if (all_made)
        return {};
    return indexes.intersection(IdSet::range(next, indexes.last())).difference(canceled);
}

void JobArray::made_index(uint32_t index) {
    made++;
    if (index >= indexes.last())
        all_made = true;
    else
        next = std::max(next, index + 1);
}

}  // namespace banyan
