#include "mount/cli/rekey_meter.h"

#include <unistd.h>

#include <cstdio>

#include "mount/cli/byte_size.h"

namespace gcfs::cli {

std::string seconds_text(double s) {
  char buf[64];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  else
    std::snprintf(buf, sizeof buf, "%d min %d s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return buf;
}

RekeyMeter::RekeyMeter(std::string what, bool show) : what_(std::move(what)), tty_(show && ::isatty(STDERR_FILENO) == 1) {}

void RekeyMeter::update(std::uint64_t done, std::uint64_t total, std::uint64_t done_files, std::uint64_t total_files) {
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  const double left = rate > 0 ? static_cast<double>(total - done) / rate : 0;
  std::string files;
  if (total_files) files = "  " + std::to_string(done_files) + "/" + std::to_string(total_files) + " files";
  std::fprintf(stderr, "\r%s %3d%%  %s of %s%s  %s/s  %s left   ", what_.c_str(),
               total ? static_cast<int>(done * 100 / total) : 100, format_byte_size(done).c_str(),
               format_byte_size(total).c_str(), files.c_str(), format_byte_size(static_cast<std::uint64_t>(rate)).c_str(),
               seconds_text(left).c_str());
  drawn_ = true;
}

void RekeyMeter::finish() {
  if (drawn_) std::fputc('\n', stderr);
  drawn_ = false;
}

}  // namespace gcfs::cli
