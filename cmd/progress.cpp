#include "cmd/progress.hpp"

#include <cstdio>

#include <unistd.h>

#include <fmt/format.h>

namespace banyan::cli {

bool progress_wanted(bool forced) {
    return forced || isatty(STDERR_FILENO);
}

ProgressBar::ProgressBar(std::string label, size_t total, bool shown)
    : label_(std::move(label)), total_(total), shown_(total > 1 && shown) {
    if (shown_)
        draw();
}

ProgressBar::~ProgressBar() {
    if (!shown_)
        return;
    draw();
    std::fputc('\n', stderr);  // the last state stays on screen
}

void ProgressBar::advance(size_t n) {
    done_ += n;
    if (!shown_)
        return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ >= std::chrono::milliseconds(100) || done_ >= total_)
        draw();
}

void ProgressBar::print_line(std::string_view line) {
    if (shown_)
        std::fputs("\r\033[K", stderr);
    fmt::print(stderr, "{}\n", line);
    if (shown_)
        draw();
}

void ProgressBar::draw() {
    constexpr size_t kWidth = 30;
    last_draw_ = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(last_draw_ - start_).count();
    size_t filled = total_ ? done_ * kWidth / total_ : kWidth;
    std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
    fmt::print(stderr, "\r{} [{}] {}/{} {}%{}\033[K", label_, bar, done_, total_, total_ ? done_ * 100 / total_ : 100,
               seconds > 0.2 ? fmt::format(" {:.0f}/s", static_cast<double>(done_) / seconds) : "");
    std::fflush(stderr);
}

}  // namespace banyan::cli
