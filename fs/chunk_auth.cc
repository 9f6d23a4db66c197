#include "fs/chunk_auth.h"

#include <algorithm>
#include <array>

#include "crypto/secret.h"

namespace gcfs {

std::string describe_chunk_runs(const std::vector<std::uint64_t>& chunks, std::size_t max_runs) {
  std::string out;
  std::size_t runs = 0;
  for (std::size_t i = 0; i < chunks.size();) {
    std::size_t j = i;
    while (j + 1 < chunks.size() && chunks[j + 1] == chunks[j] + 1) ++j;
    if (runs == max_runs) {
      out += ", ...";
      break;
    }
    if (!out.empty()) out += ", ";
    out += std::to_string(chunks[i]);
    if (j > i) out += ".." + std::to_string(chunks[j]);
    ++runs;
    i = j + 1;
  }
  return out;
}

bool all_zero(const std::uint8_t* p, std::size_t n) {
  return std::all_of(p, p + n, [](std::uint8_t b) { return b == 0; });
}

bool any_chunk_is_hole(const std::uint8_t* p, std::size_t len, std::uint64_t disk_chunk) {
  for (std::size_t at = 0; at < len; at += disk_chunk)
    if (all_zero(p + at, std::min<std::size_t>(disk_chunk, len - at))) return true;
  return false;
}

ChunkRunCheck check_chunk_run(ChunkEngine& engine, const ChunkLayout& layout, const ChunkKey& key, const FileId& id,
                              std::uint64_t first, std::uint64_t last, std::uint64_t plain_size,
                              const std::uint8_t* ct, std::vector<std::uint8_t>* scratch,
                              std::vector<std::uint64_t>* bad) {
  const std::uint64_t C = layout.chunk_size(), D = layout.disk_chunk_size();
  const std::uint64_t count = last - first + 1;
  scratch->resize(count * C);
  std::vector<ChunkOp> ops;
  ops.reserve(count);
  std::vector<std::array<std::uint8_t, kChunkAadBytes>> aads(count);
  std::vector<std::uint64_t> which;
  ChunkRunCheck r;
  for (std::uint64_t k = first; k <= last; ++k) {
    const std::uint64_t len = layout.chunk_plain_len(k, plain_size);
    const std::uint8_t* src = ct + (k - first) * D;
    if (all_zero(src, len + kChunkOverhead)) {
      ++r.holes;
      continue;
    }
    aads[k - first] = chunk_aad(id, k);
    ChunkOp op;
    op.key = &key;
    std::copy(src, src + kChunkNonceOnDisk, op.nonce.begin());
    op.aad = aads[k - first].data();
    op.aad_len = kChunkAadBytes;
    op.in = src + kChunkNonceOnDisk;
    op.out = scratch->data() + (k - first) * C;
    op.len = len;
    std::copy(src + kChunkNonceOnDisk + len, src + kChunkNonceOnDisk + len + kChunkTagOnDisk, op.tag.begin());
    ops.push_back(op);
    which.push_back(k);
  }
  if (!ops.empty()) engine.open(ops);
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (!ops[i].ok) bad->push_back(which[i]);
  r.opened = ops.size();
  secure_wipe(scratch->data(), scratch->size());  // plaintext is not kept past the check
  return r;
}

}  // namespace gcfs
