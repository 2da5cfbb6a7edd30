// Durations as users write them: "10s", "5m", "2h", "1d", "0.5s",
// "HH:MM:SS", "MM:SS", or a bare number (minutes for a time limit, as in
// Flux and Slurm; seconds where the caller says so).
#pragma once

#include <string>
#include <string_view>

#include "core/result.hpp"

namespace banyan {

enum class BareNumber { minutes, seconds };

// Seconds, or an error naming the text and the forms accepted.
Result<double> parse_duration(std::string_view text, BareNumber bare = BareNumber::minutes);
// A moment as users write it for --begin-time, in seconds since the epoch:
// "now", "+DURATION" (from `now`; a bare number is seconds), "@EPOCH",
// "HH:MM[:SS]" (the next such time of day, local), or
// "YYYY-MM-DD[ HH:MM[:SS]]" (also with T; local time). Error names the
// text and the forms accepted.
Result<double> parse_moment(std::string_view text, double now);
// A moment as "YYYY-MM-DDTHH:MM:SS", local time (whole seconds).
std::string format_moment(double seconds_since_epoch);
// A moment as a person glances at it: "02:00" when it is less than a day
// from `now`, else "2026-11-28 02:00" (local time).
std::string format_clock(double seconds_since_epoch, double now);
// "45s", "12m30s", "3h05m", "2d4h": the largest two units.
std::string format_duration(double seconds);

// Real time in seconds since the epoch (event timestamps, t_submit).
double wall_now();

}  // namespace banyan
