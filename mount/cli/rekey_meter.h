// The progress line of a re-key: redrawn in place on a terminal (bytes, rate, time left), nothing
// otherwise (the summary goes to the log).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gcfs::cli {

// "1.25 s", "12 min 3 s": a duration for the summary.
std::string seconds_text(double s);

class RekeyMeter {
 public:
  // what: "volume rekey". show: false for --quiet.
  RekeyMeter(std::string what, bool show);
  // files: 0 of 0 where the work is not counted in files (a volume).
  void update(std::uint64_t done_bytes, std::uint64_t total_bytes, std::uint64_t done_files, std::uint64_t total_files);
  void finish();

 private:
  std::string what_;
  bool tty_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace gcfs::cli
