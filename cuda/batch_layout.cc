#include "cuda/batch_layout.h"

#include <cstring>

namespace gcfs::gpu {

namespace {
std::size_t align16(std::size_t n) { return (n + 15) & ~std::size_t{15}; }
std::size_t align256(std::size_t n) { return (n + 255) & ~std::size_t{255}; }
}  // namespace

std::size_t header_capacity(std::size_t chunks) {
  return align256(align16(chunks * sizeof(ChunkDesc)) + 2 * align16((chunks + 1) * sizeof(std::uint32_t)) +
                  chunks * sizeof(ChunkScratch));
}

BatchPlan pack_batch(std::span<ChunkOp* const> ops, std::span<const std::uint32_t> key_index,
                     std::uint32_t task_blocks, std::uint32_t segment_blocks, bool open, unsigned char* buffer,
                     bool copy_data, bool host_pointers) {
  BatchPlan plan;
  const std::size_t n = ops.size();
  plan.chunks = static_cast<std::uint32_t>(n);
  plan.task_blocks = task_blocks;
  plan.segment_blocks = segment_blocks;
  plan.task_prefix_offset = align16(n * sizeof(ChunkDesc));
  plan.segment_prefix_offset = plan.task_prefix_offset + align16((n + 1) * sizeof(std::uint32_t));
  plan.scratch_offset = plan.segment_prefix_offset + align16((n + 1) * sizeof(std::uint32_t));
  plan.data_offset = align256(plan.scratch_offset + n * sizeof(ChunkScratch));
  auto* descs = reinterpret_cast<ChunkDesc*>(buffer);
  auto* task_prefix = reinterpret_cast<std::uint32_t*>(buffer + plan.task_prefix_offset);
  auto* segment_prefix = reinterpret_cast<std::uint32_t*>(buffer + plan.segment_prefix_offset);
  std::memset(buffer + plan.scratch_offset, 0, n * sizeof(ChunkScratch));
  unsigned char* data = buffer + plan.data_offset;

  std::size_t offset = 0;
  std::uint32_t tasks = 0, segments = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const ChunkOp& op = *ops[i];
    ChunkDesc& d = descs[i];
    d.key = key_index[i];
    std::memcpy(d.nonce, op.nonce.data(), kChunkNonceBytes);
    d.data_offset = static_cast<std::uint32_t>(offset);
    d.len = static_cast<std::uint32_t>(op.len);
    d.aad_len = static_cast<std::uint32_t>(op.aad_len);
    d.reserved = 0;
    d.host_in = host_pointers ? reinterpret_cast<std::uint64_t>(op.in) : 0;
    d.host_out = host_pointers ? reinterpret_cast<std::uint64_t>(op.out) : 0;
    std::memset(d.aad, 0, sizeof d.aad);
    if (op.aad_len) std::memcpy(d.aad, op.aad, op.aad_len);
    if (open) std::memcpy(d.expected_tag.w, op.tag.data(), kChunkTagBytes);
    else std::memset(d.expected_tag.w, 0, kChunkTagBytes);
    if (copy_data && op.len) std::memcpy(data + offset, op.in, op.len);
    task_prefix[i] = tasks;
    segment_prefix[i] = segments;
    tasks += (blocks_of(d.len) + task_blocks - 1) / task_blocks;
    segments += ghash_segments(d.aad_len, d.len, segment_blocks);
    offset += padded_len(op.len);
  }
  task_prefix[n] = tasks;
  segment_prefix[n] = segments;
  plan.ctr_data_tasks = tasks;
  plan.ctr_tasks = tasks + static_cast<std::uint32_t>((n + kMaskTaskChunks - 1) / kMaskTaskChunks);
  plan.segments = segments;
  plan.data_bytes = offset;
  return plan;
}

}  // namespace gcfs::gpu
