// The progress bar `gpucryptfs bench` draws on stderr: redrawn in place on a terminal, one line
// per tenth of the work otherwise (so a log file stays short).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace gcfs::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::size_t total);
  ~ProgressBar();
  // Shows that point `done` of total is starting, described by `what`.
  void update(std::size_t done, const std::string& what);
  void finish();

 private:
  std::size_t total_;
  bool tty_;
  bool finished_ = false;
  bool line_open_ = false;  // a terminal line not yet ended with a newline
  int last_tenth_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace gcfs::cli
