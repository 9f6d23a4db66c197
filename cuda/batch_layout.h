// How a batch of chunk ops is laid out in one staging buffer for one copy to the GPU: a header
// (descriptors, then the CTR task and GHASH segment prefix sums the kernels search) and a data
// area where every chunk starts 16-byte aligned. Host code only, so it is tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "crypto/chunk_engine.h"
#include "cuda/gcm_layout.h"

namespace gcfs::gpu {

struct BatchPlan {
  std::uint32_t chunks = 0;
  std::uint32_t task_blocks = 0;       // AES blocks per CTR warp task
  std::uint32_t ctr_tasks = 0;         // data tasks, then tag-mask tasks
  std::uint32_t ctr_data_tasks = 0;
  std::uint32_t segment_blocks = 0;   // GHASH segment length S
  std::uint32_t segments = 0;          // GHASH segments
  std::size_t task_prefix_offset = 0;
  std::size_t segment_prefix_offset = 0;
  std::size_t scratch_offset = 0;      // ChunkScratch[chunks], zeros
  std::size_t data_offset = 0;         // where the data area starts (after the header)
  std::size_t data_bytes = 0;
  std::size_t upload_bytes() const { return data_offset + data_bytes; }
};

// Bytes before the data area for n chunks (for sizing staging buffers).
std::size_t header_capacity(std::size_t chunks);
// Data bytes a chunk of len bytes takes (16-byte aligned).
inline std::size_t padded_len(std::size_t len) { return (len + 15) & ~std::size_t{15}; }

// Lays out one upload in `buffer`: descriptors, prefix sums, zeroed scratch, then the data area
// (every chunk 16-byte aligned). key_index[i] is where op i's key sits in the device key array.
// For open, the expected tags go into the descriptors. With copy_data false the data area is left
// for the caller to fill (in parallel) at descs[i].data_offset. With host_pointers the descriptors
// also carry each op's in and out addresses, for a direct batch (the kernel moves the data itself).
BatchPlan pack_batch(std::span<ChunkOp* const> ops, std::span<const std::uint32_t> key_index,
                     std::uint32_t task_blocks, std::uint32_t segment_blocks, bool open, unsigned char* buffer,
                     bool copy_data = true, bool host_pointers = false);

}  // namespace gcfs::gpu
