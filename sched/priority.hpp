// Multi-factor priority (doc/spec/accounting.md §7): the [priority]
// table, and a job's priority from its factors.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "core/result.hpp"

namespace banyan {

// Each in [0, 1].
struct PriorityFactors {
    double fairshare = 0;
    double urgency = 0;
    double age = 0;
    double queue = 0;
    double size = 0;
    nlohmann::json to_json() const;
};

struct PrioritySettings {
    int64_t weight_fairshare = 100000;
    int64_t weight_urgency = 10000;
    int64_t weight_age = 0;
    int64_t weight_queue = 0;
    int64_t weight_size = 0;
    double max_age = 7 * 86400;          // seconds eligible for the full age factor
    double decay_half_life = 7 * 86400;  // of usage, for fair-share
    double recalc_interval = 300;        // seconds between recomputations

    nlohmann::json weights_json() const;
    // Error names FILE: priority.KEY and what is wrong.
    static Result<PrioritySettings> read(const Config& config);
};

// Urgency 0 holds a job; the highest expedites it (jobs.md §4).
constexpr int kMaxUrgency = 31;
constexpr int64_t kExpeditePriority = 4294967295;

// 0 for a held job, kExpeditePriority for an expedited one, else
// 1 + the weighted sum of the factors (below kExpeditePriority).
int64_t combine_priority(const PrioritySettings& settings, int urgency, const PriorityFactors& factors);

}  // namespace banyan
