// A content file's O_DIRECT descriptors and the chunk-data transfers that use them (format 2's
// aligned data blocks): whole blocks go direct where offset and memory are aligned, the rest
// (and everything when O_DIRECT fails with EINVAL) through the page cache.
#include "fs/content/content_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "fs/plain_io.h"

namespace gcfs {

int ContentFile::direct_fd() {
  if (!io_ || !io_->want_direct()) return -1;
  const int d = direct_fd_.load(std::memory_order_acquire);
  if (d != -2) return d;
  std::lock_guard lk(direct_mu_);
  if (direct_fd_.load() == -2) {
    const int nd = io_->open_direct(fd_.load(), label_);
    if (nd >= 0) direct_fds_.push_back(nd);
    direct_fd_.store(nd < 0 ? -1 : nd, std::memory_order_release);
  }
  return direct_fd_.load();
}

int ContentFile::direct_fd_for(std::size_t bytes) {
  // A few blocks gain nothing from bypassing the page cache that pays for an open of their own
  // (a second open through /proc and its close, for every small file read or written).
  if (bytes < kDirectOpenMinBytes) {
    const int d = direct_fd_.load(std::memory_order_acquire);
    return d >= 0 ? d : -1;
  }
  return direct_fd();
}

namespace {
constexpr std::uint64_t kDirectAlign = kV2BlockBytes;
bool direct_aligned(const void* p, std::uint64_t off) {
  return reinterpret_cast<std::uintptr_t>(p) % kDirectAlign == 0 && off % kDirectAlign == 0;
}
// What an O_DIRECT read of len bytes reads: whole blocks.
std::size_t direct_read_len(std::size_t len) { return (len + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }
}  // namespace

int ContentFile::direct_fd_for_read(const std::uint8_t* buf, std::size_t len, std::size_t room, std::uint64_t off) {
  const std::size_t rounded = direct_read_len(len);
  const int d = direct_fd_for(rounded);
  return d >= 0 && rounded <= room && direct_aligned(buf, off) ? d : -1;
}

ssize_t ContentFile::pread_data(std::uint8_t* buf, std::size_t len, std::size_t room, std::uint64_t off) {
  if (const int d = direct_fd_for_read(buf, len, room, off); d >= 0) {
    // The last block may be partial: reading it whole stops at the end of the file. Once the len
    // bytes wanted are in, a short read is that end: no second read to hear it again (one per
    // file read to its end, whose last block is seldom whole).
    const ssize_t n = pread_full(d, buf, direct_read_len(len), off, len);
    if (n >= 0) return std::min<ssize_t>(n, static_cast<ssize_t>(len));
    if (n != -EINVAL) return n;
    io_->fall_back(label_.str() + ": an O_DIRECT read failed with EINVAL");
  }
  return pread_full(fd(), buf, len, off);
}

ssize_t ContentFile::pwrite_data(const std::uint8_t* buf, std::size_t len, std::uint64_t off) {
  std::size_t whole = 0;
  if (const int d = direct_fd_for(len); d >= 0 && direct_aligned(buf, off)) {
    // Whole blocks with O_DIRECT; a partial last block (the file's short last chunk) cannot be
    // written so without padding the file past its size, so it goes through the page cache.
    whole = len / kDirectAlign * kDirectAlign;
    if (whole > 0) {
      const ssize_t w = pwrite_full(d, buf, whole, off);
      if (w == -EINVAL) {
        io_->fall_back(label_.str() + ": an O_DIRECT write failed with EINVAL");
        whole = 0;
      } else if (w < 0) {
        return w;
      }
    }
  }
  if (whole == len) return static_cast<ssize_t>(len);
  const ssize_t w = pwrite_full(fd(), buf + whole, len - whole, off + whole);
  return w < 0 ? w : static_cast<ssize_t>(len);
}

}  // namespace gcfs
