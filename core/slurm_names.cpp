#include "core/slurm_names.hpp"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <map>

#include <fmt/format.h>

#include "core/text.hpp"

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

Result<uint8_t> slurm_mail_types(std::string_view list) {
    static const std::map<std::string, uint8_t, std::less<>> bits = {
        {"NONE", 0},
        {"BEGIN", kMailBegin},
        {"END", kMailEnd},
        {"FAIL", kMailFail},
        {"REQUEUE", kMailRequeue},
        {"INVALID_DEPEND", kMailInvalidDepend},
        {"ARRAY_TASKS", kMailArrayTasks},
        {"ALL", kMailBegin | kMailEnd | kMailFail | kMailRequeue | kMailInvalidDepend},
    };
    uint8_t events = 0;
    for (std::string one : split(list, ',')) {
        if (one.empty())
            continue;
        for (char& c : one)
            c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        auto it = bits.find(one);
        if (it == bits.end())
            return make_error(EINVAL, fmt::format("{}: expected NONE, BEGIN, END, FAIL, REQUEUE, INVALID_DEPEND, "
                                                  "ARRAY_TASKS or ALL",
                                                  one));
        events |= it->second;
    }
    return events;
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
