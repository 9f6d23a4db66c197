// What the host writes for the kernels and what they write back: per-key material, per-chunk
// descriptors, per-chunk results. Plain structs shared by the host code and the kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/gcm_math.h"

namespace gcfs::gpu {

// The largest chunk the kernels take; the vault format's chunks are 4 KiB to 1 MiB. Larger ops go
// to the fallback engine.
constexpr std::size_t kMaxGpuChunkBytes = 1u << 20;
constexpr std::size_t kMaxAadBytes = 64;

// GHASH splits a chunk's block stream (AAD blocks, ciphertext blocks, the length block) into
// segments of S blocks, counted from the end; one warp hashes one segment, each lane every 32nd
// block (Horner with H^32), then the lanes combine in a 5-level tree (H, H^2, ..., H^16) and the
// segment is scaled by H^(S u) for its position u from the end (a product the 32 lanes share). S
// is chosen per batch: 1024 for throughput (fewer trees), 128 for latency (four blocks per lane,
// whose loads are issued together: the chain waits on memory once).
constexpr std::uint32_t kSegmentBlocksLarge = 1024;
constexpr std::uint32_t kSegmentBlocksSmall = 128;
constexpr std::uint32_t kMaxStreamBlocks = kMaxGpuChunkBytes / 16 + kMaxAadBytes / 16 + 1;
constexpr std::uint32_t kSegmentPowers = kMaxStreamBlocks / kSegmentBlocksSmall + 1;  // H^(128 u)

// Nibble tables in a KeyBlob: index l holds H^(2^l); l = 5 is H^32, the Horner multiplier.
constexpr int kPowerTables = 6;

// Everything the kernels need for one key. Derived key material: built in locked host memory,
// kept only in pinned staging and device memory, never written to disk.
struct KeyBlob {
  std::uint32_t round_keys[64];                        // 60 used
  Block128 segment_power[kSegmentPowers];              // H^(128 u)
  std::uint32_t tables[kPowerTables][kNibbleTableWords];
};

// One chunk of a batch. data_offset is 16-byte aligned within the batch's data area.
struct ChunkDesc {
  std::uint32_t key;          // index into the batch's key array
  std::uint32_t nonce[3];
  std::uint32_t data_offset;
  std::uint32_t len;
  std::uint32_t aad_len;
  std::uint32_t reserved;
  // Direct batches only (BatchView::direct): the caller's page-locked input and output, which the
  // kernel reads and writes itself over the bus (4-byte aligned; exactly len bytes are touched).
  std::uint64_t host_in;
  std::uint64_t host_out;
  Block128 expected_tag;      // open only
  std::uint8_t aad[kMaxAadBytes];  // zero-padded
};
static_assert(sizeof(ChunkDesc) == 128);

// One entry of a resident worker's ring (resident_queue.h): page-locked host memory that the host
// fills and the worker kernel, which stays on the GPU, polls. The host writes the descriptor, then
// `posted` (ticket + 1, a release store); the GPU answers in the second half (tag or ok), then `done`
// (ticket + 1, after a system-wide fence). The halves sit on separate 128-byte lines, so the GPU's
// answer never shares a line with what the host writes for the next round.
struct alignas(128) ResidentEntry {
  ChunkDesc desc;            // key: the worker's key slot; host_in / host_out: the caller's memory
  std::uint64_t posted;
  std::uint32_t flags;       // kResidentInPlace; a part of a split chunk: resident_part_flags
  std::uint32_t pad0a;
  std::uint64_t pad0[14];
  Block128 tag;              // seal: written
  std::uint32_t ok;          // open: 1 = tag matched
  std::uint32_t last_part;   // 1: this entry's CTA finished the chunk (tag and ok are in this entry)
  std::uint64_t done;
  // GPU clock (ns), for GPUCRYPTFS_RESIDENT_TRACE: taken, hashing from, answered, CTR done, hashed.
  std::uint64_t stamps[5];
  std::uint64_t pad2[7];
};
static_assert(sizeof(ResidentEntry) == 384);
// The op's output is its input (a read decrypted in its own buffer): the result goes to device
// memory first and reaches the caller's buffer only once the chunk is done (and, opening, its tag
// matched), so a GPU that fails before that leaves the input for the fallback engine to redo.
constexpr std::uint32_t kResidentInPlace = 1;

// A chunk may be split over several entries (consecutive tickets), one CTA each, when the worker has
// CTAs to spare: a chunk's time on the GPU, not the bus, is then what a caller waits for. Part p of
// n takes whole GHASH segments (resident_part_range) and the CTR of exactly the blocks they hash;
// the parts add their hashes in device memory (ChunkScratch, indexed by the first part's ticket) and
// the last part to finish masks the sum, writes the tag or the comparison, and sets last_part.
// Parts are never in place (the result would have to wait in every part's device buffer).
constexpr std::uint32_t kResidentMaxParts = 16;
GCFS_HD std::uint32_t resident_part_flags(std::uint32_t part, std::uint32_t parts) { return part << 8 | parts << 16; }
GCFS_HD std::uint32_t resident_part_of(std::uint32_t flags) { return flags >> 8 & 0xff; }
GCFS_HD std::uint32_t resident_parts_of(std::uint32_t flags) {
  const std::uint32_t n = flags >> 16 & 0xff;
  return n ? n : 1;
}

// Per-chunk scratch, uploaded as zeros with the descriptors: the CTR kernel leaves E_K(J0) (the
// tag mask, counter 1) in ej0, the GHASH kernel accumulates its segments in acc.
struct ChunkScratch {
  Block128 ej0;
  Block128 acc;
  std::uint32_t segments_done;
  std::uint32_t pad[3];
};

// Builds the key material for one AES-256 key (host only: a few microseconds per key).
void build_key_blob(const std::uint8_t key[32], KeyBlob& blob);

GCFS_HD std::uint32_t blocks_of(std::uint32_t bytes) { return (bytes + 15) / 16; }
GCFS_HD std::uint32_t ghash_stream_blocks(std::uint32_t aad_len, std::uint32_t len) {
  return blocks_of(aad_len) + blocks_of(len) + 1;
}
// Segments are S blocks long counted from the end; a remainder under half a segment joins the
// first one instead of costing a warp and a lane tree of its own.
GCFS_HD std::uint32_t ghash_segments(std::uint32_t aad_len, std::uint32_t len, std::uint32_t s) {
  const std::uint32_t n = (ghash_stream_blocks(aad_len, len) + s / 2) / s;
  return n ? n : 1;
}
// Blocks [begin, end) of the GHASH stream form segment u (0 = the last segment).
GCFS_HD void segment_range(std::uint32_t total, std::uint32_t segments, std::uint32_t u, std::uint32_t s,
                           std::uint32_t* begin, std::uint32_t* end) {
  *end = total - s * u;
  *begin = u + 1 == segments ? 0 : *end - s;
}
// The resident worker's GHASH segments: a whole chunk's GHASH on one CTA is bound by the shared
// memory its table lookups read, and every segment adds a lane tree to the blocks' own multiplies,
// so whole chunks take long segments (a 64 KiB chunk is 4 of them: 25% faster for two callers of
// 128 KiB than 32 short ones). A part of a split chunk takes short ones, so that it still has one
// for every warp (1024-block parts, one warp each, were slower than whole chunks).
GCFS_HD std::uint32_t resident_segment_blocks(std::uint32_t parts) {
  return parts > 1 ? kSegmentBlocksSmall : kSegmentBlocksLarge;
}

// Part p of n of a chunk split over several CTAs (ResidentEntry): GHASH segments [*seg_begin,
// *seg_end) counted from the start of the stream (resident_segment_blocks(n) blocks each), and the
// text blocks [*blk_begin, *blk_end) that those segments hash, whose CTR the same part does. n must
// not exceed the chunk's segment count, so that every part has at least one segment.
GCFS_HD void resident_part_range(std::uint32_t aad_len, std::uint32_t len, std::uint32_t p, std::uint32_t n,
                                 std::uint32_t* seg_begin, std::uint32_t* seg_end, std::uint32_t* blk_begin,
                                 std::uint32_t* blk_end) {
  const std::uint32_t s = resident_segment_blocks(n), segs = ghash_segments(aad_len, len, s);
  const std::uint32_t total = ghash_stream_blocks(aad_len, len), aad_blocks = blocks_of(aad_len);
  *seg_begin = segs * p / n;
  *seg_end = segs * (p + 1) / n;
  std::uint32_t first_begin, first_end, last_begin, last_end;  // stream blocks of the first and last segment
  segment_range(total, segs, segs - 1 - *seg_begin, s, &first_begin, &first_end);
  segment_range(total, segs, segs - *seg_end, s, &last_begin, &last_end);
  const auto text_block = [&](std::uint32_t stream_block) {  // clamped to the text's blocks
    const std::uint32_t b = stream_block > aad_blocks ? stream_block - aad_blocks : 0;
    return b < blocks_of(len) ? b : blocks_of(len);
  };
  *blk_begin = text_block(first_begin);
  *blk_end = text_block(last_end);
}

// The tag masks E_K(J0) are computed by extra CTR tasks of 32 chunks each, one block per lane, so
// that the chunks' own tasks stay aligned to whole warps.
constexpr std::uint32_t kMaskTaskChunks = 32;

}  // namespace gcfs::gpu
