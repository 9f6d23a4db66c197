// Writes of a content file: the chunks a write covers whole are sealed straight from the caller's
// buffer, the edge chunks it keeps old bytes of are read, modified and sealed again; the format
// writes the run (seal_and_write_locked). A write past the end fills the gap with a hole first.
#include "fs/content/content_file.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "crypto/random.h"
#include "fs/content/scratch.h"

namespace gcfs {

int ContentFile::seal_and_write_locked(ChunkRange r, const std::uint8_t* plain, std::uint64_t new_size,
                                       const CipherSeen* seen) {
  std::vector<const std::uint8_t*> plains(r.count());
  for (std::uint64_t i = 0; i < r.count(); ++i) plains[i] = plain + i * layout_.chunk_size();
  return seal_and_write_locked(r, plains.data(), new_size, seen);
}

std::vector<ChunkOp>& ContentFile::chunk_ops_locked(ChunkRange r, const std::uint8_t* const* plains,
                                                   std::uint64_t new_size, std::uint8_t* out, std::size_t stride) {
  // Per thread, reused by every write (none of them calls here again while it runs).
  thread_local std::vector<ChunkOp> ops;
  thread_local std::vector<std::array<std::uint8_t, kChunkAadBytes>> aads;
  thread_local std::vector<std::uint8_t> nonces;
  const std::uint64_t n = r.count();
  ops.assign(n, ChunkOp{});
  aads.resize(n);
  nonces.resize(n * kChunkNonceOnDisk);
  random_public_bytes(nonces);  // one call to the generator for every nonce of the batch
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t k = r.first + i;
    aads[i] = chunk_aad(header_->id, k);
    ChunkOp& op = ops[i];
    op.key = &key_;
    std::copy_n(nonces.data() + i * kChunkNonceOnDisk, kChunkNonceOnDisk, op.nonce.begin());
    op.aad = aads[i].data();
    op.aad_len = kChunkAadBytes;
    op.in = plains[i];
    op.len = layout_.chunk_plain_len(k, new_size);
    op.out = out + i * stride;
  }
  return ops;
}

std::vector<ChunkOp>& ContentFile::seal_chunks_locked(ChunkRange r, const std::uint8_t* const* plains,
                                                     std::uint64_t new_size, std::uint8_t* out, std::size_t stride) {
  auto& ops = chunk_ops_locked(r, plains, new_size, out, stride);
  engine_.seal(ops);
  return ops;
}

ssize_t ContentFile::write_locked(std::uint64_t off, const std::uint8_t* in, std::size_t len) {
  const std::uint64_t C = layout_.chunk_size();
  const std::uint64_t end = off + len;
  const std::uint64_t new_size = std::max(size_, end);
  const ChunkRange r = layout_.chunks_for(off, len);

  // A chunk whose new contents the write supplies whole is sealed straight from `in` (with the
  // daemon's receive buffers in engine memory, that is also how the gpu engine reads it: no copy
  // at all). Only the edge chunks that keep old bytes, or that the write covers only in part,
  // are assembled in the scratch buffer: slot 0 for the first chunk, slot 1 for the last.
  auto covered = [&](std::uint64_t k) {
    const std::uint64_t cs = k * C, ce = cs + layout_.chunk_plain_len(k, new_size);
    return off <= cs && end >= ce;
  };
  // An edge chunk the write does not supply whole: its old bytes, zeros past the old end, and the
  // written part over them, in `slot`.
  CipherSeen seen;  // the ciphertext of the last edge chunk opened
  auto assemble = [&](std::uint64_t k, std::uint8_t* slot) -> int {
    const std::uint64_t cs = k * C;
    const std::uint64_t old_len = layout_.chunk_plain_len(k, size_);
    const std::uint64_t new_len = layout_.chunk_plain_len(k, new_size);
    if (old_len > 0) {
      int rc = open_chunks_locked({k, k}, slot, &seen);
      if (rc < 0) return rc;
    }
    if (new_len > old_len) std::memset(slot + old_len, 0, new_len - old_len);
    const std::uint64_t from = std::max(off, cs), to = std::min(end, cs + new_len);
    std::memcpy(slot + (from - cs), in + (from - off), to - from);
    return 0;
  };
  thread_local std::vector<const std::uint8_t*> plains;  // per thread: no allocation per write
  plains.assign(r.count(), nullptr);
  auto& edges = scratch(engine_, kPlainScratch, 2 * C);
  for (std::uint64_t k = r.first; k <= r.last; ++k) {
    if (covered(k)) {  // every chunk between the edges is
      plains[k - r.first] = in + (k * C - off);
      continue;
    }
    std::uint8_t* slot = edges.data() + (k == r.first ? 0 : C);
    if (int rc = assemble(k, slot); rc < 0) return rc;
    plains[k - r.first] = slot;
  }
  int rc = seal_and_write_locked(r, plains.data(), new_size, &seen);
  if (rc < 0) return rc;
  // Only a growing write changes the size, and it holds size_mu_ exclusively; writes inside the
  // file run under the shared lock alongside readers of size_, so they must not store to it.
  // Its first new chunk, at least a nonce and a tag long, went over any fragment.
  if (new_size != size_) {
    size_ = new_size;
    fragment_ = 0;
  }
  return static_cast<ssize_t>(len);
}

ssize_t ContentFile::write(std::uint64_t off, const std::uint8_t* in, std::size_t len) {
  if (len == 0) return 0;
  {
    std::shared_lock lk(size_mu_);
    if (size_valid_ && off + len <= size_ && size_ > 0) {
      const ChunkRange r = layout_.chunks_for(off, len);
      auto guard = chunk_locks_.lock(r.first, r.last, true);
      return write_locked(off, in, len);
    }
  }
  // Writes that grow the file change the size and the last chunk's length: run them alone.
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) return r;
  return write_growing_locked(off, in, len);
}

ssize_t ContentFile::append(const std::uint8_t* in, std::size_t len, std::uint64_t* at) {
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) return r;
  if (at) *at = size_;
  if (len == 0) return 0;
  return write_growing_locked(size_, in, len);
}

ssize_t ContentFile::write_growing_locked(std::uint64_t off, const std::uint8_t* in, std::size_t len) {
  const std::uint64_t old_size = size_;
  if (off > size_) {
    int r = truncate_locked(off);
    if (r < 0) return r;
  }
  const ssize_t n = write_locked(off, in, len);
  // The gap before off was filled only for this write: a failed write (a full disk) must not
  // leave the file longer than it was.
  if (n < 0 && size_ != old_size) (void)truncate_locked(old_size);
  return n;
}

}  // namespace gcfs
