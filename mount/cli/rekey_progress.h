// The progress of a re-key: on a terminal one line on stderr redrawn in place at most four times
// a second (bytes, files, rate, time left); quiet when stderr is not a terminal. At the end, one
// summary with the time spent reading, in the cipher and writing, which also goes to the log: a
// re-key whose cipher is not the bound shows it there.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace gcfs::cli {

struct RekeyCounts {
  std::uint64_t bytes_done = 0, bytes_total = 0;
  std::uint64_t files_done = 0, files_total = 0;
  double read_s = 0, cipher_s = 0, write_s = 0;
};

// "1.5 s": a duration in the summaries.
std::string seconds_text(double s);
// "1.50 GiB of 4 GiB, 120 of 400 files, 300 MiB/s, 0:09 left" (elapsed_s since the start).
std::string rekey_progress_line(const RekeyCounts& c, double elapsed_s);
// "re-keyed 4 GiB in 400 files in 13.2 s (310 MiB/s): read 5.1 s, cipher 2.0 s, write 6.0 s"
std::string rekey_summary_line(const RekeyCounts& c, double elapsed_s);

class RekeyProgress {
 public:
  // tty: draw the line (stderr is a terminal and --quiet was not given).
  explicit RekeyProgress(bool tty);
  ~RekeyProgress();
  void set_totals(std::uint64_t bytes, std::uint64_t files);
  // Thread-safe; redraws now and then.
  void add(std::uint64_t bytes, std::uint64_t files);
  void add_times(double read_s, double cipher_s, double write_s);
  RekeyCounts counts() const;
  double elapsed_s() const;
  // Ends the line; returns the summary.
  std::string finish();

 private:
  void maybe_draw();
  bool tty_;
  std::atomic<std::uint64_t> bytes_{0}, files_{0}, bytes_total_{0}, files_total_{0};
  std::atomic<std::uint64_t> read_ns_{0}, cipher_ns_{0}, write_ns_{0};
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex draw_mu_;
  std::chrono::steady_clock::time_point last_draw_{};
  bool drawn_ = false;
};

}  // namespace gcfs::cli
