// A progress bar on stderr for long work (submit --cc, job wait --all,
// cancel --all): "LABEL [#####.....] 512/1000 51% 1234/s". Drawn only when
// stderr is a terminal or the user asked (--progress), never into a file
// or pipe unasked; redrawn at most ten times a second, so it costs nothing
// beside the work.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace banyan::cli {

// --progress, or stderr is a terminal.
bool progress_wanted(bool forced);

class ProgressBar {
  public:
    // Drawn when `shown` (progress_wanted()), never for fewer than 2 items.
    ProgressBar(std::string label, size_t total, bool shown);
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;
    void advance(size_t n = 1);
    // Prints `line` (and a newline) on stderr above the bar, not after it.
    void print_line(std::string_view line);

  private:
    void draw();

    std::string label_;
    size_t total_;
    size_t done_ = 0;
    bool shown_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace banyan::cli
