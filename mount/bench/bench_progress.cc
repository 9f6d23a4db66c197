// The bench verb's progress bar (bench_progress.h), in place on a terminal, in tenths otherwise.
#include "mount/bench/bench_progress.h"

#include <unistd.h>

#include <cstdio>

namespace gcfs::cli {

ProgressBar::ProgressBar(std::size_t total)
    : total_(total), tty_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() {
  // Left early (an error): end the bar's line so the error message starts on its own.
  if (line_open_) std::fputc('\n', stderr);
}

void ProgressBar::update(std::size_t done, const std::string& what) {
  // An empty sweep (no usable engine) is complete from the start.
  const double frac = total_ == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total_);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    // \033[K clears what a longer previous description left behind.
    std::fprintf(stderr, "\r[%s] %3.0f%% %zu/%zu %5.0fs  %s\033[K", bar.c_str(), frac * 100, done, total_, elapsed,
                 what.c_str());
    line_open_ = true;
  } else {
    const int tenth = static_cast<int>(frac * 10);
    if (tenth == last_tenth_) return;
    last_tenth_ = tenth;
    std::fprintf(stderr, "bench: %3.0f%% (%zu/%zu points, %.0f s) %s\n", frac * 100, done, total_, elapsed, what.c_str());
  }
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  update(total_, "done");
  if (line_open_) std::fputc('\n', stderr);
  line_open_ = false;
}

}  // namespace gcfs::cli
