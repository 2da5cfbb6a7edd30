// A latency histogram with fixed buckets, 100 µs to 10 s (a factor of
// about 2.5 apart), in the shape Prometheus wants: cumulative counts per
// upper bound, a count and a sum (doc/spec/http.md §5). Observing is a
// few comparisons, cheap enough for every scheduling pass and commit.
#pragma once

#include <array>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace banyan {

class Histogram {
  public:
    static constexpr std::array<double, 12> kBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                       0.01,   0.025,   0.1,    0.5,   2.5,    10};

    void observe(double seconds) {
        size_t i = 0;
        while (i < kBounds.size() && seconds > kBounds[i])
            i++;
        counts_[i]++;  // counts_[kBounds.size()]: over the last bound (+Inf)
        count_++;
        sum_ += seconds;
    }
    uint64_t count() const { return count_; }
    double sum() const { return sum_; }

    // {"buckets": [cumulative count per bound, then +Inf], "count", "sum"}.
    nlohmann::json to_json() const {
        nlohmann::json buckets = nlohmann::json::array();
        uint64_t running = 0;
        for (uint64_t c : counts_)
            buckets.push_back(running += c);
        return {{"buckets", buckets}, {"count", count_}, {"sum", sum_}};
    }

  private:
    std::array<uint64_t, kBounds.size() + 1> counts_{};
    uint64_t count_ = 0;
    double sum_ = 0;
};

}  // namespace banyan
