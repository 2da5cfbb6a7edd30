// Planner: how much of one resource is in use over time, as a step function
// of [start, end) spans (doc/spec/sched.md section 3). Each aggregate of the
// resource pool owns one; most stay empty, so an empty planner costs 32 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace banyan {

// End of a span that never ends (a job with no duration).
inline constexpr int64_t kForever = std::numeric_limits<int64_t>::max() / 4;

class Planner {
  public:
    explicit Planner(int64_t total = 0) : total_(total) {}

    int64_t total() const { return total_; }
    void set_total(int64_t total) { total_ = total; }
    // The amount in use at time t.
    int64_t used_at(int64_t t) const;
    // The most in use at any time in [start, end).
    int64_t max_used(int64_t start, int64_t end) const;
    // What is free during all of [start, end).
    int64_t avail(int64_t start, int64_t end) const { return total_ - max_used(start, end); }
    // Adds `amount` in use over [start, end); a negative amount gives it back.
    void add(int64_t start, int64_t end, int64_t amount);
    // True when nothing is in use at any time.
    bool idle() const { return steps_.empty(); }

  private:
    struct Step {
        int64_t time;
        int64_t used;  // from `time` until the next step; 0 before the first
    };
    // Index of the step in force at t, or -1 before the first.
    std::ptrdiff_t step_at(int64_t t) const;
    void split_at(int64_t t);

    int64_t total_;
    std::vector<Step> steps_;
};

}  // namespace banyan
