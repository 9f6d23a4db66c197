// Changes of a content file's size and holes: truncate (shrinking reseals the new last chunk,
// growing leaves holes), fallocate's reservation, and hole punching (whole chunks become holes,
// partial ones are resealed with zeros).
#include "fs/content/content_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "fs/content/scratch.h"
#include "fs/log.h"
#include "fs/plain_io.h"

namespace gcfs {

int ContentFile::drop_fragment_locked() {
  if (fragment_ == 0) return 0;
  // The whole chunks stay; a file of a header and a fragment keeps its header.
  const std::uint64_t keep = layout_.base_offset() + std::max<std::uint64_t>(layout_.cipher_size(size_), kFileHeaderBytes);
  if (::ftruncate(fd(), static_cast<off_t>(keep)) != 0) return -errno;
  fragment_ = 0;
  return 0;
}

int ContentFile::empty_locked(bool may_hold_durable) {
  if (::ftruncate(fd(), static_cast<off_t>(layout_.base_offset())) != 0) return -errno;
  // The next write lays a fresh header (a new file ID) where the old one is, in place. Should a
  // power cut keep that write but not the truncation (a size change, which only a sync commits),
  // the fsynced chunks would lie under a header they were not sealed for, and every one of them
  // would fail. So the truncation of a file that may hold durable bytes reaches the disk first:
  // after a cut the file holds what it held, or nothing, never EIO. The cost is one fdatasync per
  // emptying of such a file (an O_TRUNC open of an existing one); a file emptied again before its
  // next fsync, or never fsynced since its creation here, holds nothing durable and pays none.
  const int synced = may_hold_durable && ::fdatasync(fd()) != 0 ? -errno : 0;
  std::lock_guard hl(header_mu_);
  header_.reset();  // the next write starts a new file ID, hence a new key
  header_ready_.store(false, std::memory_order_relaxed);
  size_ = 0;
  size_valid_ = true;
  fragment_ = 0;
  durable_size_.store(0);
  return synced;
}

int ContentFile::truncate_locked(std::uint64_t new_size) {
  const std::uint64_t C = layout_.chunk_size();
  // Truncating to the size the file reads as still replaces a fragment (docs/FORMAT.md "Sizes"),
  // and gives back space reserved past the end (fallocate KEEP_SIZE), as ext4's truncate does.
  if (new_size == size_) {
    if (int rc = drop_fragment_locked(); rc < 0) return rc;
    struct stat st {};
    if (::fstat(fd(), &st) == 0 && static_cast<std::uint64_t>(st.st_blocks) * 512 > static_cast<std::uint64_t>(st.st_size))
      (void)::ftruncate(fd(), st.st_size);
    return 0;
  }
  if (new_size == 0) return empty_locked(durable_size_.load() > 0);
  if (layout_.is_inline(new_size) && size_ > C) {
    // Format 2, shrinking into an inline file: cut to chunk 0 alone first, so that the inline
    // ciphertext, which lies where the entries of chunks 3 and up do, overwrites no entry of a
    // chunk that is still there should the daemon die in between.
    if (int rc = truncate_locked(C); rc < 0) return rc;
  }
  auto& plain = scratch(engine_, kPlainScratch, C);
  std::optional<std::uint64_t> resealed;  // the chunk already rewritten for the new size
  if (new_size < size_) {
    const std::uint64_t k = layout_.chunk_of(new_size);
    if (new_size % C != 0) {
      CipherSeen seen;
      int rc = open_chunks_locked({k, k}, plain.data(), &seen);
      if (rc < 0) return rc;
      rc = seal_and_write_locked({k, k}, plain.data(), new_size, &seen);
      if (rc < 0) return rc;
      resealed = k;
    }
  } else if (size_ % C != 0) {
    // The old last chunk is partial: it grows (zero-padded) before the rest becomes holes.
    const std::uint64_t k = layout_.chunk_of(size_);
    CipherSeen seen;
    int rc = open_chunks_locked({k, k}, plain.data(), &seen);
    if (rc < 0) return rc;
    std::memset(plain.data() + size_ % C, 0, C - size_ % C);
    rc = seal_and_write_locked({k, k}, plain.data(), std::min(new_size, (k + 1) * C), &seen);
    if (rc < 0) return rc;
    resealed = k;
  } else if (size_ == 0) {
    int rc = ensure_header_locked(true);
    if (rc < 0) return rc;
  }
  // Growing over an incomplete last chunk: cut it off first, so that the chunk growing in its
  // place is a hole (zeros) instead of its bytes followed by zeros (EIO). (A partial last chunk
  // was resealed above; a file with a fragment ends at a chunk boundary, so none was.)
  if (new_size > size_) {
    if (int rc = drop_fragment_locked(); rc < 0) return rc;
    // Format 2: a new last chunk shorter than kV2HoleMinBytes is a hole only with a zero entry,
    // and its entry slot may hold what an earlier, longer file or a torn append left there.
    const std::uint64_t last = (new_size - 1) / C;
    if (int rc = format_.prepare_hole(*this, last, new_size, size_ == 0 || last > (size_ - 1) / C); rc < 0) return rc;
  }
  if (::ftruncate(fd(), static_cast<off_t>(layout_.base_offset() + layout_.cipher_size(new_size))) != 0) {
    const int err = -errno;
    // The filesystem refused the size (EFBIG past its limit, say): reseal the edge chunk at its
    // old length from the plaintext still in hand, so a failed truncate leaves the file as it was
    // instead of with a chunk whose length no longer matches the file size.
    if (resealed) {
      (void)seal_and_write_locked({*resealed, *resealed}, plain.data(), size_);
      (void)::ftruncate(fd(), static_cast<off_t>(layout_.base_offset() + layout_.cipher_size(size_)));
    }
    return err;
  }
  size_ = new_size;
  fragment_ = 0;
  if (durable_size_.load() > new_size) durable_size_.store(new_size);
  return 0;
}

int ContentFile::truncate(std::uint64_t new_size) {
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) {
    // A file whose size is impossible (damage, or a torn write nothing could put back) can still
    // be emptied: truncating to zero keeps none of its bytes, so nothing is lost by not reading
    // them, and the file becomes usable again (O_TRUNC, `: > file`).
    if (r != -EIO || new_size != 0) return r;
    return empty_locked(true);  // what lies there was all on the disk when it was opened
  }
  return truncate_locked(new_size);
}

int ContentFile::extend_to(std::uint64_t new_size) {
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) return r;
  return new_size > size_ ? truncate_locked(new_size) : 0;
}

int ContentFile::allocate(std::uint64_t off, std::uint64_t len, bool keep_size) {
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) return r;
  // Whole chunks, the header too when the range starts at chunk 0: a write into the range seals
  // whole chunks, however few bytes it brings. The backing filesystem's reserved blocks read as
  // zeros, which is how a hole chunk reads.
  const ChunkRange r = layout_.chunks_for(off, len);
  const DiskRange reserve = format_.reserve_range(layout_, r);
  const std::uint64_t begin = reserve.begin, end = reserve.end;
  if (::fallocate(fd(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(begin), static_cast<off_t>(end - begin)) != 0) {
    const int err = errno;
    if (err == ENOSPC || err == EDQUOT) {
      // The backing filesystem may keep what it reserved before it ran out (ext4 does). Past the
      // file's end that would be space taken that no size shows: give it back.
      struct stat st {};
      if (::fstat(fd(), &st) == 0 && end > static_cast<std::uint64_t>(st.st_size)) {
        const std::uint64_t from = std::max<std::uint64_t>(begin, static_cast<std::uint64_t>(st.st_size));
        (void)::fallocate(fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from),
                          static_cast<off_t>(end - from));
      }
      log::warning(label_.str() + ": fallocate refused: disk full");
    }
    return -err;
  }
  // Grow only, under the same lock (FallocateRace: a WRITE may grow the file meanwhile).
  return !keep_size && off + len > size_ ? truncate_locked(off + len) : 0;
}

int ContentFile::punch_disk_range_locked(std::uint64_t disk_off, std::uint64_t disk_len) {
  if (::fallocate(fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(disk_off),
                  static_cast<off_t>(disk_len)) == 0)
    return 0;
  if (errno != EOPNOTSUPP) return -errno;
  // No hole punching here: zeros on disk read as a hole all the same, they just take space.
  const std::vector<std::uint8_t> zeros(std::min<std::uint64_t>(disk_len, layout_.disk_chunk_size()), 0);
  for (std::uint64_t done = 0; done < disk_len;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(zeros.size(), disk_len - done));
    ssize_t w = pwrite_full(fd(), zeros.data(), n, disk_off + done);
    if (w < 0) return static_cast<int>(w);
    done += n;
  }
  return 0;
}

int ContentFile::punch_hole(std::uint64_t off, std::uint64_t len) {
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) return r;
  if (off >= size_ || len == 0) return 0;
  const std::uint64_t end = std::min(size_, off + len);
  const std::uint64_t C = layout_.chunk_size();
  const ChunkRange r = layout_.chunks_for(off, end - off);
  auto& plain = scratch(engine_, kPlainScratch, C);
  // Consecutive whole chunks are punched as one disk range: punched one by one, the filesystem
  // block that straddles each chunk boundary would stay allocated.
  std::uint64_t run_begin = 0, run_end = 0;
  auto flush = [&]() -> int {
    const int rc = run_end > run_begin ? punch_disk_range_locked(run_begin, run_end - run_begin) : 0;
    run_begin = run_end = 0;
    return rc;
  };
  for (std::uint64_t k = r.first; k <= r.last; ++k) {
    const std::uint64_t cs = k * C, ce = std::min(size_, cs + C);
    const std::uint64_t zs = std::max(off, cs), ze = std::min(end, ce);
    if (zs == cs && ze == ce) {
      // Whole chunk: all-zero bytes on disk read back as a hole (format 2: its ciphertext; the
      // entry stays behind and is ignored, but for a chunk shorter than kV2HoleMinBytes).
      if (int rc = format_.prepare_hole(*this, k, size_, true); rc < 0) return rc;
      const DiskRange hole = format_.hole_range(layout_, k, size_);
      if (hole.begin != run_end) {
        int rc = flush();
        if (rc < 0) return rc;
        run_begin = hole.begin;
      }
      run_end = hole.end;
      continue;
    }
    int rc = flush();
    if (rc < 0) return rc;
    CipherSeen seen;
    rc = open_chunks_locked({k, k}, plain.data(), &seen);
    if (rc < 0) return rc;
    std::memset(plain.data() + (zs - cs), 0, ze - zs);
    rc = seal_and_write_locked({k, k}, plain.data(), size_, &seen);
    if (rc < 0) return rc;
  }
  return flush();
}

}  // namespace gcfs
