// Whether a vault's content files are read and written with O_DIRECT (format 2 only:
// chunk data lies at 4 KiB-aligned offsets and the engine's buffers are page-aligned, so data
// moves between the disk and the engine's memory with no page-cache copy), and the fallback to
// buffered I/O where the backing filesystem refuses O_DIRECT (some network and FUSE filesystems,
// tmpfs before Linux 6.6). The mount's --backing-io picks the mode (docs/USAGE.md).
//
// Only chunk data travels through O_DIRECT: metadata blocks, file headers, inline files and the
// short last chunk of a file (whose length is not a whole number of blocks) go through the page
// cache as before. The kernel keeps the two coherent for each range.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include "fs/file_label.h"

namespace gcfs {

enum class BackingIoMode { Auto, Direct, Buffered };

std::optional<BackingIoMode> parse_backing_io_mode(std::string_view s);
const char* backing_io_mode_name(BackingIoMode m);

class BackingIo {
 public:
  explicit BackingIo(BackingIoMode mode = BackingIoMode::Buffered) : mode_(mode) {}
  BackingIo(const BackingIo&) = delete;
  BackingIo& operator=(const BackingIo&) = delete;

  BackingIoMode mode() const { return mode_; }
  // Whether content I/O tries O_DIRECT now: not buffered, and not fallen back.
  bool want_direct() const { return mode_ != BackingIoMode::Buffered && !fell_back_.load(std::memory_order_relaxed); }
  bool fell_back() const { return fell_back_.load(std::memory_order_relaxed); }
  // O_DIRECT was refused: buffered from now on, and the reason logged, once.
  void fall_back(const std::string& reason);
  // Turns O_DIRECT off for good without a message (a format 1 vault, whose chunks are unaligned).
  void disable() { fell_back_.store(true); }

  // What probe() found.
  struct Probe {
    enum class Outcome {
      Direct,   // the backing filesystem takes O_DIRECT
      Refused,  // it does not, or it could not be checked (why says which)
      Damaged,  // the probe file is not the vault's regular file (missing, a FIFO, a link, ...)
    };
    Outcome outcome = Outcome::Direct;
    std::string why;  // empty for Direct; for Damaged, what was found ("missing", "is a FIFO, ...")
  };
  // Checks that the backing filesystem takes O_DIRECT, by opening the vault's own regular file
  // `name` beneath dirfd (fs/safe_open.h: no link followed, a FIFO or device only looked at, never
  // opened) and then again with O_DIRECT, and reading its first block into page-aligned memory.
  static Probe probe(int dirfd, const std::string& name);

  // A descriptor open on the same file as fd, with fd's access mode and O_DIRECT; the caller owns
  // it. -1 when direct I/O is not wanted, or when this file cannot have one (a permission
  // problem: that file goes buffered); a filesystem that refuses O_DIRECT (EINVAL) makes the
  // whole vault fall back, with its one log line naming label.
  int open_direct(int fd, const FileLabel& label);

 private:
  const BackingIoMode mode_;
  std::atomic<bool> fell_back_{false};
  std::once_flag logged_;
};

}  // namespace gcfs
