#include "mount/cli/rekey_progress.h"

#include <cstdio>
#include <iostream>

#include "mount/cli/byte_size.h"

namespace gcfs::cli {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

namespace {

std::string clock_text(double s) {
  const auto t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

std::string rate_text(std::uint64_t bytes, double s) {
  if (s <= 0) return "-";
  return format_byte_size(static_cast<std::uint64_t>(static_cast<double>(bytes) / s)) + "/s";
}

}  // namespace

std::string rekey_progress_line(const RekeyCounts& c, double elapsed_s) {
  std::string line = format_byte_size(c.bytes_done) + " of " + format_byte_size(c.bytes_total) + ", " +
                     std::to_string(c.files_done) + " of " + std::to_string(c.files_total) + " files, " +
                     rate_text(c.bytes_done, elapsed_s);
  if (c.bytes_done > 0 && elapsed_s > 0 && c.bytes_total >= c.bytes_done) {
    const double left = static_cast<double>(c.bytes_total - c.bytes_done) * elapsed_s / static_cast<double>(c.bytes_done);
    line += ", " + clock_text(left) + " left";
  }
  return line;
}

std::string rekey_summary_line(const RekeyCounts& c, double elapsed_s) {
  return "re-keyed " + format_byte_size(c.bytes_done) + " in " + std::to_string(c.files_done) + " files in " +
         seconds_text(elapsed_s) + " (" + rate_text(c.bytes_done, elapsed_s) + "): read " + seconds_text(c.read_s) +
         ", cipher " + seconds_text(c.cipher_s) + ", write " + seconds_text(c.write_s) +
         " (summed over threads; the cipher is the bound only when its time is near the total)";
}

RekeyProgress::RekeyProgress(bool tty) : tty_(tty) {}
RekeyProgress::~RekeyProgress() {
  if (drawn_) std::cerr << "\n";
}

void RekeyProgress::set_totals(std::uint64_t bytes, std::uint64_t files) {
  bytes_total_ = bytes;
  files_total_ = files;
}

void RekeyProgress::add(std::uint64_t bytes, std::uint64_t files) {
  bytes_ += bytes;
  files_ += files;
  if (tty_) maybe_draw();
}

void RekeyProgress::add_times(double read_s, double cipher_s, double write_s) {
  read_ns_ += static_cast<std::uint64_t>(read_s * 1e9);
  cipher_ns_ += static_cast<std::uint64_t>(cipher_s * 1e9);
  write_ns_ += static_cast<std::uint64_t>(write_s * 1e9);
}

RekeyCounts RekeyProgress::counts() const {
  RekeyCounts c;
  c.bytes_done = bytes_, c.bytes_total = bytes_total_, c.files_done = files_, c.files_total = files_total_;
  c.read_s = static_cast<double>(read_ns_) / 1e9;
  c.cipher_s = static_cast<double>(cipher_ns_) / 1e9;
  c.write_s = static_cast<double>(write_ns_) / 1e9;
  return c;
}

double RekeyProgress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void RekeyProgress::maybe_draw() {
  std::unique_lock lock(draw_mu_, std::try_to_lock);
  if (!lock) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(250)) return;
  last_draw_ = now;
  drawn_ = true;
  std::cerr << "\r\033[K" << rekey_progress_line(counts(), elapsed_s()) << std::flush;
}

std::string RekeyProgress::finish() {
  if (drawn_) {
    std::cerr << "\r\033[K" << rekey_progress_line(counts(), elapsed_s()) << "\n";
    drawn_ = false;
  }
  return rekey_summary_line(counts(), elapsed_s());
}

}  // namespace gcfs::cli
