#include "core/slurm_names.hpp"

#include <cstdint>

#include <fmt/format.h>

namespace banyan {

std::string slurm_ended_state(std::string_view result, std::string_view exception) {
    if (result == "completed")
        return "COMPLETED";
    if (result == "canceled")
        return "CANCELLED";
    if (result == "timeout")
        return "TIMEOUT";
    if (exception == "oom")
        return "OUT_OF_MEMORY";
    if (exception == "node-failure")
        return "NODE_FAIL";
    if (exception == "preempt")
        return "PREEMPTED";
    return "FAILED";
}

std::string slurm_duration(double seconds, bool short_form) {
    auto s = static_cast<uint64_t>(seconds < 0 ? 0 : seconds);
    uint64_t days = s / 86400;
    if (days > 0)
        return fmt::format("{}-{:02}:{:02}:{:02}", days, s % 86400 / 3600, s % 3600 / 60, s % 60);
    if (short_form)  // squeue's: hours only when needed, unpadded
        return s < 3600 ? fmt::format("{}:{:02}", s / 60, s % 60)
                        : fmt::format("{}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60);
    return fmt::format("{:02}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60);
}

}  // namespace banyan
