// A content file's header: read and checked once, or made fresh (random file ID) by the first
// write to a file that holds no data, never adopted from an empty file (file ID poisoning).
#include "fs/content/content_file.h"

#include <unistd.h>

#include <cstring>

#include "fs/plain_io.h"

namespace gcfs {

void ContentFile::forget_header_locked() {
  std::lock_guard hl(header_mu_);
  header_.reset();
  header_ready_.store(false, std::memory_order_relaxed);
}

int ContentFile::ensure_header_locked(bool create, const std::uint8_t* read_header,
                                      std::optional<std::array<std::uint8_t, kFileHeaderBytes>>* to_write) {
  if (to_write) to_write->reset();
  // Every read and write comes here: once the header is known, without a lock (it is dropped
  // only under size_mu_ held exclusively, so never while a caller, who holds it, reads it).
  if (header_ready_.load(std::memory_order_acquire)) return 0;
  std::lock_guard hl(header_mu_);
  if (header_) return 0;
  std::array<std::uint8_t, kFileHeaderBytes> raw{};
  // A file that holds no data yet gets a fresh header even when one is there: a header-only file
  // is what an attacker with write access would plant to make this file share another file's ID
  // (and so its key and chunk AADs), which the gocryptfs audit calls file ID poisoning. So when
  // the size says so, whatever is there need not even be read.
  const bool empty = size_valid_ && size_ == 0;
  ssize_t n = 0;
  if (!(create && empty)) {
    if (read_header) {
      std::memcpy(raw.data(), read_header, raw.size());
      n = static_cast<ssize_t>(raw.size());
    } else {
      n = pread_full(fd(), raw.data(), raw.size(), layout_.base_offset());
      if (n < 0) return static_cast<int>(n);
    }
  }
  if (create && (n == 0 || empty)) {
    FileHeader h = FileHeader::random();
    auto enc = h.encode(static_cast<std::uint16_t>(layout_.format()));
    if (to_write) {
      *to_write = enc;  // the caller writes it with its chunks
    } else {
      ssize_t w = pwrite_full(fd(), enc.data(), enc.size(), layout_.base_offset());
      if (w < 0) {
        (void)::ftruncate(fd(), static_cast<off_t>(layout_.base_offset()));  // an empty stream, never a torn header
        return static_cast<int>(w);
      }
    }
    header_ = h;
  } else {
    if (static_cast<std::size_t>(n) < raw.size()) return corrupt("file header is truncated");
    auto h = FileHeader::decode(raw, static_cast<std::uint16_t>(layout_.format()));
    if (!h)
      return corrupt("file header is not a gpucryptfs version " + std::to_string(layout_.format()) +
                     " header (wrong magic or version)");
    header_ = *h;
  }
  key_ = keys_.content_key(header_->id);
  header_ready_.store(true, std::memory_order_release);
  return 0;
}

}  // namespace gcfs
