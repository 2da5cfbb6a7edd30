#include "sched/planner.hpp"

#include <algorithm>

namespace banyan {

std::ptrdiff_t Planner::step_at(int64_t t) const {
    auto it = std::upper_bound(steps_.begin(), steps_.end(), t, [](int64_t x, const Step& s) { return x < s.time; });
    return (it - steps_.begin()) - 1;
}

int64_t Planner::used_at(int64_t t) const {
    std::ptrdiff_t i = step_at(t);
    return i < 0 ? 0 : steps_[static_cast<size_t>(i)].used;
}

int64_t Planner::max_used(int64_t start, int64_t end) const {
    if (steps_.empty())
        return 0;
    std::ptrdiff_t i = step_at(start);
    int64_t most = i < 0 ? 0 : steps_[static_cast<size_t>(i)].used;
    for (size_t j = static_cast<size_t>(i + 1); j < steps_.size() && steps_[j].time < end; ++j)
        most = std::max(most, steps_[j].used);
    return most;
}

void Planner::split_at(int64_t t) {
    std::ptrdiff_t i = step_at(t);
    if (i >= 0 && steps_[static_cast<size_t>(i)].time == t)
        return;
    int64_t used = i < 0 ? 0 : steps_[static_cast<size_t>(i)].used;
    steps_.insert(steps_.begin() + (i + 1), Step{t, used});
}

void Planner::add(int64_t start, int64_t end, int64_t amount) {
    if (start >= end || amount == 0)
        return;
    split_at(start);
    split_at(end);
    for (auto& s : steps_)
        if (s.time >= start && s.time < end)
            s.used += amount;
    // Drop steps that do not change the value, so that spans given back
    // leave nothing behind.
    int64_t previous = 0;
    size_t out = 0;
    for (size_t i = 0; i < steps_.size(); ++i) {
        if (steps_[i].used == previous)
            continue;
        previous = steps_[i].used;
        steps_[out++] = steps_[i];
    }
    steps_.resize(out);
}

}  // namespace banyan
