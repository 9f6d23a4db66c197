// Reads of a content file: the chunks a request touches opened as one batch by the format
// (open_chunks_locked), into this thread's scratch or straight into the caller's buffer.
#include "fs/content/content_file.h"

#include <algorithm>
#include <cstring>

#include "fs/content/scratch.h"
#include "fs/log.h"

namespace gcfs {

void ContentFile::add_open_op(std::vector<ChunkOp>& ops, std::vector<std::array<std::uint8_t, kChunkAadBytes>>& aads,
                              std::uint64_t k, const std::uint8_t* nonce, const std::uint8_t* in, std::uint8_t* out,
                              std::size_t len, const std::uint8_t* tag) {
  aads.push_back(chunk_aad(header_->id, k));
  ChunkOp op;
  op.key = &key_;
  std::copy(nonce, nonce + kChunkNonceOnDisk, op.nonce.begin());
  op.aad = aads.back().data();
  op.aad_len = kChunkAadBytes;
  op.in = in;
  op.out = out;
  op.len = len;
  std::copy(tag, tag + kChunkTagOnDisk, op.tag.begin());
  ops.push_back(op);
}

int ContentFile::open_and_report(std::vector<ChunkOp>& ops, std::uint64_t first_chunk, const std::uint8_t* out) {
  if (!ops.empty()) engine_.open(ops);
  const std::uint64_t C = layout_.chunk_size();
  int result = 0;
  for (const auto& op : ops) {
    if (!op.ok) {
      const std::uint64_t k = first_chunk + static_cast<std::uint64_t>(op.out - out) / C;
      result = corrupt("chunk " + std::to_string(k) + " (plaintext bytes " + std::to_string(k * C) + ".." +
                       std::to_string(k * C + op.len) + ") failed authentication: tampered or damaged");
    }
  }
  return result;
}

ssize_t ContentFile::read(std::uint64_t off, std::size_t len, std::uint8_t* out) {
  const std::uint8_t* data = nullptr;
  const ssize_t n = read_view(off, len, &data);
  if (n > 0) std::memcpy(out, data, static_cast<std::size_t>(n));
  return n;
}

void ContentFile::prepare_thread(const ChunkLayout& layout, std::size_t max_request) {
  // A request of max_request bytes at any offset touches at most this many chunks.
  const std::uint64_t chunks = max_request / layout.chunk_size() + 2;
  plan_scratch(kCipherReadScratch, layout.content().read_scratch_bytes(layout, chunks));
  plan_scratch(kPlainScratch, chunks * layout.chunk_size());
  plan_scratch(kCipherSealedScratch, chunks * layout.disk_chunk_size());
}

ssize_t ContentFile::read_view(std::uint64_t off, std::size_t len, const std::uint8_t** data) {
  return read_view(off, len, data, nullptr, 0);
}

ssize_t ContentFile::read_view(std::uint64_t off, std::size_t len, const std::uint8_t** data, std::uint8_t* room,
                               std::size_t room_bytes) {
  std::shared_lock lk(size_mu_);
  if (!size_valid_) {
    lk.unlock();
    std::int64_t s = plain_size();
    if (s < 0) return s;
    lk.lock();
  }
  if (off >= size_ || len == 0) return 0;
  len = static_cast<std::size_t>(std::min<std::uint64_t>(len, size_ - off));
  const ChunkRange r = layout_.chunks_for(off, len);
  auto guard = chunk_locks_.lock(r.first, r.last, false);
  const std::uint64_t C = layout_.chunk_size();
  // open_chunks_locked writes up to whole chunks: into room only when all of them fit there.
  const bool into_room = room && off == r.first * C && r.count() * C <= room_bytes;
  HostBuffer* plain = into_room ? nullptr : &scratch(engine_, kPlainScratch, r.count() * C);
  std::uint8_t* out = into_room ? room : plain->data();
  int rc = open_chunks_locked(r, out, nullptr, into_room ? room_bytes : plain->size());
  if (rc < 0) return rc;
  *data = out + (off - r.first * C);
  return static_cast<ssize_t>(len);
}

}  // namespace gcfs
