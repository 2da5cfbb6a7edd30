#include "sched/priority.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace banyan {
namespace {

constexpr int64_t kMaxWeight = 1000000000;

}  // namespace

nlohmann::json PriorityFactors::to_json() const {
    return {{"fairshare", fairshare}, {"urgency", urgency}, {"age", age}, {"queue", queue}, {"size", size}};
}

nlohmann::json PrioritySettings::weights_json() const {
    return {{"fairshare", weight_fairshare},
            {"urgency", weight_urgency},
            {"age", weight_age},
            {"queue", weight_queue},
            {"size", weight_size}};
}

Result<PrioritySettings> PrioritySettings::read(const Config& config) {
    PrioritySettings s;
    auto fairshare = config.get_int("priority.weight-fairshare", 0, kMaxWeight, s.weight_fairshare);
    auto urgency = config.get_int("priority.weight-urgency", 0, kMaxWeight, s.weight_urgency);
    auto age = config.get_int("priority.weight-age", 0, kMaxWeight, s.weight_age);
    auto queue = config.get_int("priority.weight-queue", 0, kMaxWeight, s.weight_queue);
    auto size = config.get_int("priority.weight-size", 0, kMaxWeight, s.weight_size);
    auto max_age = config.get_duration("priority.max-age", s.max_age);
    auto half_life = config.get_duration("priority.decay-half-life", s.decay_half_life);
    auto interval = config.get_duration("priority.recalc-interval", s.recalc_interval);
    if (auto e = first_error(fairshare, urgency, age, queue, size, max_age, half_life, interval))
        return *e;
    for (auto [value, key] : {std::pair{*max_age, "max-age"}, std::pair{*half_life, "decay-half-life"},
                              std::pair{*interval, "recalc-interval"}})
        if (!(value > 0))
            return make_error(EINVAL, fmt::format("{}: priority.{}: expected a duration above 0", config.source(), key));
    s.weight_fairshare = *fairshare;
    s.weight_urgency = *urgency;
    s.weight_age = *age;
    s.weight_queue = *queue;
    s.weight_size = *size;
    s.max_age = *max_age;
    s.decay_half_life = *half_life;
    s.recalc_interval = *interval;
    return s;
}

int64_t combine_priority(const PrioritySettings& s, int urgency, const PriorityFactors& f) {
    if (urgency <= 0)
        return 0;
    if (urgency >= kMaxUrgency)
        return kExpeditePriority;
    auto clamp01 = [](double x) { return std::isfinite(x) ? std::clamp(x, 0.0, 1.0) : 0.0; };
    double sum = static_cast<double>(s.weight_fairshare) * clamp01(f.fairshare) +
                 static_cast<double>(s.weight_urgency) * clamp01(f.urgency) +
                 static_cast<double>(s.weight_age) * clamp01(f.age) +
                 static_cast<double>(s.weight_queue) * clamp01(f.queue) +
                 static_cast<double>(s.weight_size) * clamp01(f.size);
    // Five weights of up to 10^9 could pass 2^32 - 1: kept below expedite.
    return std::min<int64_t>(1 + static_cast<int64_t>(std::floor(sum)), kExpeditePriority - 1);
}

}  // namespace banyan
