// One batch of the gpu engine on its slot: the keys it needs in the slot's key cache, its ops
// packed and staged (or left where the GPU reads them itself), the copies and kernels queued on
// the slot's stream, and, once the stream is done, the results handed back to the ops. A failure
// anywhere is the GPU's: fail() takes it out of use and the scheduler (gpu_engine.cu) redoes the
// batch elsewhere.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "cuda/cuda_handles.h"
#include "cuda/gpu_engine_impl.h"

namespace gcfs::gpu {
namespace {

// Groups consecutive direct ops of equal length whose host addresses advance by one stride (the
// chunks of one request in one scratch buffer) into runs, so a run costs one 2D copy, one driver
// call, instead of one per chunk. emit(first op, count, stride); stride is unused for count 1.
// A run stays inside one pinned buffer: a 2D copy whose rows lie in two callers' buffers spans
// the memory between them, which the driver refuses ("invalid argument": seen on the H100 with
// eight callers' 256 KiB chunks gathered into one batch).
template <class Ptr, class Emit>
void for_each_run(const Batch& b, const std::vector<std::uintptr_t>& direct, Ptr ptr, Emit emit) {
  const std::size_t n = b.ops.size();
  for (std::size_t i = 0; i < n;) {
    if (!direct[i]) {
      ++i;
      continue;
    }
    const std::size_t len = b.ops[i]->len;
    std::size_t j = i + 1, stride = 0;
    for (; j < n && direct[j] == direct[i] && b.ops[j]->len == len; ++j) {
      const auto a = reinterpret_cast<std::uintptr_t>(ptr(j)), prev = reinterpret_cast<std::uintptr_t>(ptr(j - 1));
      if (a <= prev || a - prev < len) break;  // the 2D copy needs a forward pitch of at least len
      if (j == i + 1) stride = a - prev;
      else if (a - prev != stride) break;
    }
    emit(i, j - i, stride);
    i = j;
  }
}

// Copies in and out of the pinned buffers run on several threads once a batch is large enough
// to repay waking them (measured: from 128 KiB it cost a mounted daemon CPU time and a 1 MiB
// request latency): one core's memcpy is far slower than the PCIe link. Ops are cut into
// pieces of at most 32 KiB so that a few large chunks still spread. f(op, offset, length).
template <class F>
void copy_ranges(ThreadPool* copy_pool, const Batch& b, F&& f) {
  constexpr std::size_t kPiece = 32u << 10;
  if (!copy_pool || b.plan.data_bytes < (512u << 10)) {
    for (std::size_t i = 0; i < b.ops.size(); ++i)
      if (b.ops[i]->len) f(i, 0, b.ops[i]->len);
    return;
  }
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pieces;  // (op, piece index)
  for (std::size_t i = 0; i < b.ops.size(); ++i)
    for (std::size_t p = 0; p * kPiece < b.ops[i]->len; ++p)
      pieces.emplace_back(static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(p));
  copy_pool->parallel_for(pieces.size(), [&](std::size_t k) {
    const auto [i, p] = pieces[k];
    const std::size_t from = std::size_t{p} * kPiece;
    f(i, from, std::min(kPiece, b.ops[i]->len - from));
  });
}

}  // namespace

// How one batch runs, decided before anything is staged.
struct GpuEngine::LaunchShape {
  std::vector<std::uint32_t> key_index;  // per op: its key's slot in the stream's key cache
  std::vector<std::uint32_t> uploads;    // key slots loaded for this batch, to copy to the GPU
  CtrVariant variant = CtrVariant::Coarse;
  std::uint32_t task_blocks = 0, segment_blocks = 0;
  bool fused = false;   // one cooperative launch for CTR and GHASH
  bool direct = false;  // the kernel reads and writes the ops' host memory itself
  bool mapped = false;  // direct, and the header rides in the launch's parameters
};

std::uint32_t GpuEngine::key_slot(Slot& s, const ChunkKey& key, std::vector<std::uint32_t>& uploads) {
  for (std::uint32_t i = 0; i < kSlotKeys; ++i)
    if (s.key_used[i] && s.keys[i] == key) {
      s.key_used[i] = s.batches;
      return i;
    }
  std::uint32_t victim = 0;  // least recently used; never one this batch uses (limit: kSlotKeys)
  for (std::uint32_t i = 1; i < kSlotKeys; ++i)
    if (s.key_used[i] < s.key_used[victim]) victim = i;
  const auto blob = host_keys_.get(key);
  std::memcpy(s.h_keys.get() + victim * sizeof(KeyBlob), blob->data(), sizeof(KeyBlob));
  s.keys[victim] = key;
  s.key_used[victim] = s.batches;
  uploads.push_back(victim);
  return victim;
}

bool GpuEngine::launch(Batch& b) {
  Slot& s = *b.slot;
  try {
    check_injected_failure(s);
    ++s.batches;
    g_launches.fetch_add(1, std::memory_order_relaxed);
    g_pieces.fetch_add(b.pieces.size(), std::memory_order_relaxed);
    const LaunchShape shape = shape_batch(b, s);
    // A direct batch's header travels in the launch's parameters, so it is packed in ordinary memory.
    thread_local std::vector<unsigned char> direct_header;
    stage_batch(b, s, shape, direct_header);
    start_batch(b, s, shape, direct_header);
    return true;
  } catch (const std::exception& e) {
    fail(s, e.what());
    return false;
  }
}

// A stream that failed before, or a failure the tests asked for (GpuOptions::inject_failure_*).
void GpuEngine::check_injected_failure(const Slot& s) {
  if (s.broken) throw CudaError("stream unusable after an earlier error", cudaErrorUnknown);
  const bool injected_device =
      options_.inject_failure_on_device < 0 || options_.inject_failure_on_device == s.dev->device;
  if (injected_device && ((options_.inject_failure_at_batch > 0 && ++launches_ == options_.inject_failure_at_batch) ||
                          (options_.inject_failure_now && options_.inject_failure_now->exchange(false))))
    throw CudaError("injected failure", cudaErrorUnknown);
}

// The batch's ops, their keys' slots (loading the keys the slot lacks), and the kernels to run.
GpuEngine::LaunchShape GpuEngine::shape_batch(Batch& b, Slot& s) {
  LaunchShape shape;
  b.ops.clear();
  std::uint64_t blocks = 0;
  for (auto& p : b.pieces)
    for (auto& op : p.ops) b.ops.push_back(&op), blocks += blocks_of(static_cast<std::uint32_t>(op.len));
  shape.key_index.resize(b.ops.size());
  const ChunkKey* last = nullptr;
  std::uint32_t last_index = 0;
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    if (b.ops[i]->key != last) last = b.ops[i]->key, last_index = key_slot(s, *last, shape.uploads);
    shape.key_index[i] = last_index;
  }
  CtrVariant v = variant_;
  if (auto_kernel_) v = blocks < static_cast<std::uint64_t>(s.dev->sm_count) * 256 ? CtrVariant::Fine : CtrVariant::Coarse;
  shape.variant = v;
  shape.task_blocks = ctr_task_blocks(v, blocks, s.dev->sm_count);
  // Short GHASH segments for small batches: a lone request waits on the longest serial chain.
  shape.segment_blocks = blocks * 16 < (2u << 20) ? kSegmentBlocksSmall : kSegmentBlocksLarge;
  // Small fine-grained batches: one cooperative launch instead of the CTR and GHASH kernels;
  // with every op in engine memory, the launch moves the data itself (no copy calls).
  // Not for a gathered batch of 256 KiB or more, though: a fused launch is cooperative and holds
  // every SM, so fused batches on different streams run one after another, while separate CTR
  // and GHASH kernels and the copy engines' transfers of several streams overlap. Under load,
  // that overlap is worth more than the launch the fused kernel saves (measured on the H100:
  // 32 callers of 128 KiB reached 13 GB/s with fused 1 MiB batches).
  shape.fused = options_.fused && v == CtrVariant::Fine && blocks * 16 < (2u << 20) &&
                !(b.gathered && blocks * 16 >= (256u << 10));
  classify_direct(b);
  // Direct: every op in engine memory, so the kernel moves the data itself (no copy calls, no
  // host copy). Up to kDirectMaxChunks descriptors the header rides in the launch's parameters
  // (mapped); a larger direct batch, gathered from many callers, copies its header (descriptors
  // and prefix sums, a few KiB) to the GPU first.
  shape.direct = shape.fused && options_.direct && b.all_direct;
  shape.mapped = shape.direct && b.ops.size() <= kDirectMaxChunks;
  return shape;
}

// Packs the header (into the slot's upload buffer, or direct_header for a mapped batch), copies the
// staged ops' input into the upload buffer, and queues the copies to the GPU on the slot's stream.
void GpuEngine::stage_batch(Batch& b, Slot& s, const LaunchShape& shape, std::vector<unsigned char>& direct_header) {
  const bool mapped = shape.mapped, direct = shape.direct;
  if (mapped) direct_header.resize(header_capacity(b.ops.size()));
  b.plan = pack_batch(b.ops, shape.key_index, shape.task_blocks, shape.segment_blocks, !b.seal,
                      mapped ? direct_header.data() : s.h_in.get(), /*copy_data=*/false, /*host_pointers=*/direct);
  b.offsets.resize(b.ops.size());
  for (std::size_t i = 0, off = 0; i < b.ops.size(); off += padded_len(b.ops[i]->len), ++i) b.offsets[i] = off;
  bool any_staged_in = false;
  for (std::size_t i = 0; i < b.ops.size(); ++i) any_staged_in |= !b.direct_in[i] && b.ops[i]->len;
  unsigned char* in_data = s.h_in.get() + b.plan.data_offset;
  if (any_staged_in)
    copy_ranges(copy_pool_.get(), b, [&](std::size_t i, std::size_t from, std::size_t n) {
      if (!b.direct_in[i]) std::memcpy(in_data + b.offsets[i] + from, b.ops[i]->in + from, n);
    });

  const cudaStream_t st = s.stream.get();
  check_cuda(cudaSetDevice(s.dev->device), "cudaSetDevice");
  for (std::uint32_t k : shape.uploads)
    check_cuda(cudaMemcpyAsync(s.d_keys.get() + k * sizeof(KeyBlob), s.h_keys.get() + k * sizeof(KeyBlob),
                               sizeof(KeyBlob), cudaMemcpyHostToDevice, st),
               "copying key material to the GPU");
  // The header always goes through staging; the data area only if some op needs it (a mixed
  // batch uploads it whole, and the direct copies that follow in stream order overwrite the
  // direct ops' parts of it).
  if (!mapped)
    check_cuda(cudaMemcpyAsync(s.d_in.get(), s.h_in.get(), any_staged_in ? b.plan.upload_bytes() : b.plan.data_offset,
                               cudaMemcpyHostToDevice, st),
               "copying the batch to the GPU");
  unsigned char* d_in_data = s.d_in.get() + b.plan.data_offset;
  if (!direct)
    for_each_run(b, b.direct_in, [&](std::size_t i) { return b.ops[i]->in; },
                 [&](std::size_t i, std::size_t count, std::size_t stride) {
                   const std::size_t len = b.ops[i]->len, pitch = padded_len(len);
                   check_cuda(count == 1 ? cudaMemcpyAsync(d_in_data + b.offsets[i], b.ops[i]->in, len,
                                                           cudaMemcpyHostToDevice, st)
                                         : cudaMemcpy2DAsync(d_in_data + b.offsets[i], pitch, b.ops[i]->in, stride,
                                                             len, count, cudaMemcpyHostToDevice, st),
                              "copying chunks to the GPU");
                 });
}

// Queues the kernels on the slot's stream, the copies of the results back (unless the kernel writes
// them to host memory itself), and the event complete() waits for.
void GpuEngine::start_batch(Batch& b, Slot& s, const LaunchShape& shape, const std::vector<unsigned char>& direct_header) {
  const bool mapped = shape.mapped, direct = shape.direct, fused = shape.fused;
  const cudaStream_t st = s.stream.get();
  const std::size_t n = b.ops.size();
  b.out_data_offset = align256(n * (sizeof(Block128) + sizeof(std::uint32_t)));
  BatchView view;
  view.descs = s.d_in.get<ChunkDesc>();
  view.chunks = static_cast<std::uint32_t>(n);
  view.ctr_task_prefix = reinterpret_cast<const std::uint32_t*>(s.d_in.get() + b.plan.task_prefix_offset);
  view.ctr_tasks = b.plan.ctr_tasks;
  view.ctr_data_tasks = b.plan.ctr_data_tasks;
  view.segment_blocks = b.plan.segment_blocks;
  view.segment_prefix = reinterpret_cast<const std::uint32_t*>(s.d_in.get() + b.plan.segment_prefix_offset);
  view.segments = b.plan.segments;
  view.keys = s.d_keys.get<KeyBlob>();
  view.in = s.d_in.get() + b.plan.data_offset;
  view.out = s.d_out.get() + b.out_data_offset;
  view.tags = s.d_out.get<Block128>();
  view.ok = reinterpret_cast<std::uint32_t*>(s.d_out.get() + n * sizeof(Block128));
  view.scratch = reinterpret_cast<ChunkScratch*>(s.d_in.get() + b.plan.scratch_offset);
  view.open = !b.seal;
  const int sms = s.dev->launch_sms;
  if (mapped) {  // results straight into the pinned result area that complete() reads
    view.direct = true;
    view.tags = s.h_out.get<Block128>();
    view.ok = reinterpret_cast<std::uint32_t*>(s.h_out.get() + n * sizeof(Block128));
    view.scratch = s.d_scratch.get<ChunkScratch>();
    thread_local DirectHeader h;
    std::memcpy(h.descs, direct_header.data(), n * sizeof(ChunkDesc));
    std::memcpy(h.ctr_task_prefix, direct_header.data() + b.plan.task_prefix_offset, (n + 1) * sizeof(std::uint32_t));
    std::memcpy(h.segment_prefix, direct_header.data() + b.plan.segment_prefix_offset, (n + 1) * sizeof(std::uint32_t));
    check_cuda(launch_fused_direct(view, h, &s.barrier_count, s.dev->tables, sms, st), "launching the AES-GCM kernel");
    check_cuda(cudaEventRecord(s.done.get(), st), "cudaEventRecord");
    return;
  }
  if (direct) {  // header on the GPU (uploaded above, scratch zeroed), data and results over the bus
    view.direct = true;
    view.tags = s.h_out.get<Block128>();
    view.ok = reinterpret_cast<std::uint32_t*>(s.h_out.get() + n * sizeof(Block128));
    check_cuda(launch_fused(view, s.dev->tables, sms, st), "launching the AES-GCM kernel");
    check_cuda(cudaEventRecord(s.done.get(), st), "cudaEventRecord");
    return;
  }
  check_cuda(fused     ? launch_fused(view, s.dev->tables, sms, st)
             : b.seal ? launch_seal(view, shape.variant, shape.task_blocks, s.dev->tables, sms, st)
                      : launch_open(view, shape.variant, shape.task_blocks, s.dev->tables, sms, st),
             "launching the AES-GCM kernels");
  check_cuda(cudaMemcpyAsync(s.h_out.get(), s.d_out.get(),
                             b.out_data_offset + (b.any_staged_out ? b.plan.data_bytes : 0),
                             cudaMemcpyDeviceToHost, st),
             "copying the results from the GPU");
  const unsigned char* d_out_data = s.d_out.get() + b.out_data_offset;
  for_each_run(b, b.direct_out, [&](std::size_t i) { return b.ops[i]->out; },
               [&](std::size_t i, std::size_t count, std::size_t stride) {
                 const std::size_t len = b.ops[i]->len, pitch = padded_len(len);
                 check_cuda(count == 1 ? cudaMemcpyAsync(b.ops[i]->out, d_out_data + b.offsets[i], len,
                                                         cudaMemcpyDeviceToHost, st)
                                       : cudaMemcpy2DAsync(b.ops[i]->out, stride, d_out_data + b.offsets[i], pitch,
                                                           len, count, cudaMemcpyDeviceToHost, st),
                            "copying chunks from the GPU");
               });
  check_cuda(cudaEventRecord(s.done.get(), st), "cudaEventRecord");
}

bool GpuEngine::complete(Batch& b) {
  Slot& s = *b.slot;
  try {
    check_cuda(cudaSetDevice(s.dev->device), "cudaSetDevice");
    const auto deadline = Clock::now() + (b.spin ? options_.spin : std::chrono::microseconds(0));
    cudaError_t e;
    while ((e = cudaEventQuery(s.done.get())) == cudaErrorNotReady && Clock::now() < deadline) {
    }
    if (e == cudaErrorNotReady) e = cudaEventSynchronize(s.done.get());
    check_cuda(e, "running the AES-GCM batch");
    const std::size_t n = b.ops.size();
    const auto* tags = s.h_out.get<Block128>();
    const auto* ok = reinterpret_cast<const std::uint32_t*>(s.h_out.get() + n * sizeof(Block128));
    const unsigned char* data = s.h_out.get() + b.out_data_offset;
    for (std::size_t i = 0; i < n; ++i) {
      ChunkOp& op = *b.ops[i];
      if (b.seal) std::memcpy(op.tag.data(), tags[i].w, kChunkTagBytes);
      op.ok = b.seal || ok[i] == 1;
    }
    for (std::size_t i = 0; i < n; ++i)  // the GPU zeroed it too; never trust a copy for that
      if (b.direct_out[i] && !b.ops[i]->ok && b.ops[i]->len) std::memset(b.ops[i]->out, 0, b.ops[i]->len);
    if (b.any_staged_out)
      copy_ranges(copy_pool_.get(), b, [&](std::size_t i, std::size_t from, std::size_t len) {
        ChunkOp& op = *b.ops[i];
        if (b.direct_out[i]) return;
        if (op.ok) std::memcpy(op.out + from, data + b.offsets[i] + from, len);
        else std::memset(op.out + from, 0, len);
      });
    return true;
  } catch (const std::exception& e) {
    fail(s, e.what());
    return false;
  }
}

// Which ops the GPU copies directly. Output goes direct only when it does not overlap the input:
// should the batch fail after the copy back began, the fallback engine redoes it from op.in,
// which must still hold the input.
void GpuEngine::classify_direct(Batch& b) {
  const std::size_t n = b.ops.size();
  b.direct_in.assign(n, 0);
  b.direct_out.assign(n, 0);
  b.any_staged_out = false;
  b.all_direct = true;
  auto reg = pinned_->lock();
  for (std::size_t i = 0; i < n; ++i) {
    const ChunkOp& op = *b.ops[i];
    if (op.len == 0) continue;
    b.direct_in[i] = pinned_->buffer_of_locked(op.in, op.len);
    // In place (out overlaps in), the copies are still direct: the stream copies the input to
    // the GPU before the kernel runs and the result back after it. Only the zero-copy kernel
    // (all_direct) must not: it writes the plaintext over the ciphertext that its GHASH reads
    // afterwards. (Staging the result instead cost a host copy of every in-place read: 8 streams
    // reading through the mount on the H100, gpu engine, 6.0 to 6.6 GB/s at 0.83 to 0.94 daemon
    // CPU s/GB; with the copies direct, 8.2 to 9.5 GB/s at 0.53 to 0.64.)
    const bool disjoint = op.out + op.len <= op.in || op.in + op.len <= op.out;
    b.direct_out[i] = pinned_->buffer_of_locked(op.out, op.len);
    b.any_staged_out |= !b.direct_out[i];
    const bool aligned = ((reinterpret_cast<std::uintptr_t>(op.in) | reinterpret_cast<std::uintptr_t>(op.out)) & 3) == 0;
    b.all_direct = b.all_direct && disjoint && b.direct_in[i] && b.direct_out[i] && aligned;
  }
}

}  // namespace gcfs::gpu
