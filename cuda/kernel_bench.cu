// Kernel-only timing: a synthetic batch already resident on the device, timed with CUDA events.
// What the GPU itself sustains, without PCIe or host work; the engine benchmarks add those.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "crypto/errors.h"
#include "cuda/batch_layout.h"
#include "cuda/cuda_handles.h"
#include "cuda/gcm_kernels.h"
#include "cuda/gpu_engine.h"
#include "cuda/host_tables.h"
#include "cuda/resident_queue.h"

namespace gcfs {

std::vector<std::string> gpu_kernel_variants() { return {"coarse", "fine"}; }

GpuKernelTiming gpu_kernel_benchmark(const std::string& variant, const std::string& what, std::size_t chunk_size,
                                     std::size_t total_bytes, int device) {
  using namespace gpu;
  // Its allocations and frees may wait for the device to go idle: no resident worker meanwhile (an
  // engine of this process may have one running; its requests take the launched path until then).
  ResidentPause pause;
  CtrVariant v;
  if (!parse_variant(variant, &v)) throw UserError("unknown GPU kernel variant '" + variant + "'");
  if (what != "ctr" && what != "seal" && what != "open")
    throw UserError("unknown kernel benchmark '" + what + "': choose ctr, seal or open");
  if (chunk_size == 0 || chunk_size > kMaxGpuChunkBytes) throw UserError("chunk size must be 1 byte to 1 MiB");
  std::string why;
  if (list_gpus(&why).empty()) throw UserError("no GPU for the kernel benchmark: " + why);
  try {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    check_cuda(configure_kernels(), "configuring the kernels");
    int sms = 0;
    check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "device attributes");

    const std::size_t chunks = std::max<std::size_t>(1, total_bytes / chunk_size);
    const std::size_t bytes = chunks * chunk_size;
    constexpr std::size_t kKeys = 4;  // a few files' worth of keys, as a real batch has
    std::mt19937_64 rng(12345);
    std::vector<ChunkKey> keys(kKeys);
    for (auto& k : keys)
      for (auto& b : k.bytes) b = static_cast<std::uint8_t>(rng());
    std::vector<unsigned char> plain(bytes);
    for (std::size_t i = 0; i < bytes; i += 8) {
      const std::uint64_t r = rng();
      std::memcpy(plain.data() + i, &r, std::min<std::size_t>(8, bytes - i));
    }
    std::vector<unsigned char> aad(24, 7);
    std::vector<ChunkOp> ops(chunks);
    std::vector<ChunkOp*> op_ptrs(chunks);
    std::vector<std::uint32_t> key_index(chunks);
    for (std::size_t i = 0; i < chunks; ++i) {
      ops[i].key = &keys[i * kKeys / chunks];
      for (auto& b : ops[i].nonce) b = static_cast<std::uint8_t>(rng());
      ops[i].aad = aad.data();
      ops[i].aad_len = aad.size();
      ops[i].in = plain.data() + i * chunk_size;
      ops[i].len = chunk_size;
      op_ptrs[i] = &ops[i];
      key_index[i] = static_cast<std::uint32_t>(i * kKeys / chunks);
    }
    const std::uint64_t blocks = bytes / 16;
    const std::uint32_t task_blocks = ctr_task_blocks(v, blocks, sms);
    std::vector<unsigned char> upload(header_capacity(chunks) + bytes + 16 * chunks);
    const BatchPlan plan =
        pack_batch(op_ptrs, key_index, task_blocks, kSegmentBlocksLarge, what == "open", upload.data());

    std::vector<KeyBlob> blobs(kKeys);
    for (std::size_t k = 0; k < kKeys; ++k) build_key_blob(keys[k].data(), blobs[k]);
    DeviceBuffer d_upload(device, upload.size()), d_out(device, plan.data_bytes);
    DeviceBuffer d_keys(device, sizeof(KeyBlob) * kKeys), d_te0(device, 1024);
    DeviceBuffer d_results(device, chunks * 20);
    check_cuda(cudaMemcpy(d_upload.get(), upload.data(), plan.upload_bytes(), cudaMemcpyHostToDevice), "upload");
    check_cuda(cudaMemcpy(d_keys.get(), blobs.data(), sizeof(KeyBlob) * kKeys, cudaMemcpyHostToDevice), "upload");
    check_cuda(cudaMemcpy(d_te0.get(), host_te0().data(), 1024, cudaMemcpyHostToDevice), "upload");
    std::fill(blobs.begin(), blobs.end(), KeyBlob{});

    BatchView view;
    unsigned char* d_header = d_upload.get();
    view.descs = reinterpret_cast<const ChunkDesc*>(d_header);
    view.chunks = static_cast<std::uint32_t>(chunks);
    view.ctr_task_prefix = reinterpret_cast<const std::uint32_t*>(d_header + plan.task_prefix_offset);
    view.ctr_tasks = plan.ctr_tasks;
    view.ctr_data_tasks = plan.ctr_data_tasks;
    view.segment_blocks = plan.segment_blocks;
    view.segment_prefix = reinterpret_cast<const std::uint32_t*>(d_header + plan.segment_prefix_offset);
    view.segments = plan.segments;
    view.keys = d_keys.get<KeyBlob>();
    view.in = d_header + plan.data_offset;
    view.out = d_out.get();
    view.tags = d_results.get<Block128>();
    view.ok = reinterpret_cast<std::uint32_t*>(d_results.get() + chunks * 16);
    // The scratch is zeroed once; repeated passes leave the accumulators dirty, which changes the
    // tags computed but not the work done, and the timing is all that is kept here.
    view.scratch = reinterpret_cast<ChunkScratch*>(d_header + plan.scratch_offset);
    view.open = what == "open";
    const DeviceTables tables{d_te0.get<std::uint32_t>()};

    Stream stream(device);
    Event start(device, cudaEventDefault), stop(device, cudaEventDefault);
    auto pass = [&] {
      if (what == "ctr") return launch_ctr_only(view, v, task_blocks, tables, sms, stream.get());
      if (what == "seal") return launch_seal(view, v, task_blocks, tables, sms, stream.get());
      return launch_open(view, v, task_blocks, tables, sms, stream.get());
    };
    for (int i = 0; i < 3; ++i) check_cuda(pass(), "kernel launch");
    check_cuda(cudaStreamSynchronize(stream.get()), "warm-up");
    std::vector<double> times;
    for (int i = 0; i < 15; ++i) {
      check_cuda(cudaEventRecord(start.get(), stream.get()), "event");
      check_cuda(pass(), "kernel launch");
      check_cuda(cudaEventRecord(stop.get(), stream.get()), "event");
      check_cuda(cudaEventSynchronize(stop.get()), "kernel run");
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, start.get(), stop.get()), "event time");
      times.push_back(ms * 1e-3);
    }
    std::sort(times.begin(), times.end());
    return {times[times.size() / 2], bytes};
  } catch (const CudaError& e) {
    throw UserError(std::string("GPU kernel benchmark failed: ") + e.what());
  }
}

std::vector<std::pair<std::string, double>> gpu_transfer_probe(int device) {
  using namespace gpu;
  ResidentPause pause;  // as in gpu_kernel_benchmark
  std::vector<std::pair<std::string, double>> out;
  try {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    Stream s1(device), s2(device);
    Event start(device, cudaEventDefault), stop(device, cudaEventDefault);
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    auto wait = [](cudaStream_t st) {  // spin, as the engine does for small batches
      cudaError_t e;
      while ((e = cudaStreamQuery(st)) == cudaErrorNotReady) {
      }
      check_cuda(e, "stream");
    };
    using Clock = std::chrono::steady_clock;
    const std::size_t small = 4096, big = std::size_t{64} << 20;
    PinnedBuffer h_a(big), h_b(big);
    DeviceBuffer d_a(device, big), d_b(device, big);
    std::memset(h_a.get(), 1, big);
    std::memset(h_b.get(), 2, big);
    std::vector<double> t;
    for (int i = 0; i < 300; ++i) {
      const auto t0 = Clock::now();
      check_cuda(launch_empty_kernel(s1.get()), "empty kernel");
      wait(s1.get());
      t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    out.emplace_back("empty_kernel_round_trip_us", median(t));
    t.clear();
    for (int i = 0; i < 300; ++i) {
      const auto t0 = Clock::now();
      check_cuda(cudaMemcpyAsync(d_a.get(), h_a.get(), small, cudaMemcpyHostToDevice, s1.get()), "copy");
      check_cuda(cudaMemcpyAsync(h_b.get(), d_a.get(), small, cudaMemcpyDeviceToHost, s1.get()), "copy");
      wait(s1.get());
      t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    out.emplace_back("copy_4KiB_there_and_back_us", median(t));
    auto bandwidth = [&](bool h2d, bool d2h) {
      std::vector<double> gbs;
      for (int i = 0; i < 7; ++i) {
        check_cuda(cudaEventRecord(start.get(), s1.get()), "event");
        check_cuda(cudaStreamWaitEvent(s2.get(), start.get()), "event");
        if (h2d) check_cuda(cudaMemcpyAsync(d_a.get(), h_a.get(), big, cudaMemcpyHostToDevice, s1.get()), "copy");
        if (d2h) check_cuda(cudaMemcpyAsync(h_b.get(), d_b.get(), big, cudaMemcpyDeviceToHost, s2.get()), "copy");
        check_cuda(cudaEventRecord(stop.get(), s2.get()), "event");
        check_cuda(cudaStreamWaitEvent(s1.get(), stop.get()), "event");
        check_cuda(cudaEventRecord(stop.get(), s1.get()), "event");
        check_cuda(cudaEventSynchronize(stop.get()), "copy");
        float ms = 0;
        check_cuda(cudaEventElapsedTime(&ms, start.get(), stop.get()), "event");
        gbs.push_back(static_cast<double>(big) * ((h2d ? 1 : 0) + (d2h ? 1 : 0)) / (ms * 1e-3) / 1e9);
      }
      return median(gbs);
    };
    out.emplace_back("pinned_h2d_GBps", bandwidth(true, false));
    out.emplace_back("pinned_d2h_GBps", bandwidth(false, true));
    out.emplace_back("pinned_both_ways_GBps", bandwidth(true, true));
    std::vector<unsigned char> pageable(big, 3);
    t.clear();
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      std::memcpy(h_a.get(), pageable.data(), big);
      t.push_back(static_cast<double>(big) / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
    }
    out.emplace_back("memcpy_into_pinned_1core_GBps", median(t));
    PinnedBuffer wc(big, true);
    t.clear();
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      std::memcpy(wc.get(), pageable.data(), big);
      t.push_back(static_cast<double>(big) / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
    }
    out.emplace_back("memcpy_into_write_combined_pinned_1core_GBps", median(t));
    t.clear();
    std::vector<unsigned char> pageable2(big, 4);
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      std::memcpy(pageable2.data(), h_b.get(), big);
      t.push_back(static_cast<double>(big) / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
    }
    out.emplace_back("memcpy_out_of_pinned_1core_GBps", median(t));
  } catch (const CudaError& e) {
    throw UserError(std::string("GPU transfer probe failed: ") + e.what());
  }
  return out;
}

std::vector<std::pair<std::string, double>> gpu_transfer_probe_all(const std::vector<int>& devices) {
  using namespace gpu;
  ResidentPause pause;  // as in gpu_kernel_benchmark
  // Every GPU copies at once, each from and to its own page-locked buffers: what the host (its
  // memory and its PCIe root complexes) carries for all of them together, the ceiling under an
  // engine that spreads its batches over these GPUs. Timed by the wall clock: events of different
  // devices cannot be compared.
  struct PerDevice {
    int device;
    Stream up, down;
    PinnedBuffer h_in, h_out;
    DeviceBuffer d_in, d_out;
  };
  constexpr std::size_t big = std::size_t{128} << 20;
  std::vector<std::pair<std::string, double>> out;
  try {
    std::vector<std::unique_ptr<PerDevice>> per;
    for (int d : devices) {
      check_cuda(cudaSetDevice(d), "cudaSetDevice");
      per.push_back(std::unique_ptr<PerDevice>(
          new PerDevice{d, Stream(d), Stream(d), PinnedBuffer(big), PinnedBuffer(big), DeviceBuffer(d, big), DeviceBuffer(d, big)}));
      std::memset(per.back()->h_in.get(), 1, big);
    }
    using Clock = std::chrono::steady_clock;
    auto bandwidth = [&](bool h2d, bool d2h) {
      std::vector<double> gbs;
      for (int i = 0; i < 7; ++i) {
        const auto t0 = Clock::now();
        for (auto& p : per) {
          check_cuda(cudaSetDevice(p->device), "cudaSetDevice");
          if (h2d) check_cuda(cudaMemcpyAsync(p->d_in.get(), p->h_in.get(), big, cudaMemcpyHostToDevice, p->up.get()), "copy");
          if (d2h) check_cuda(cudaMemcpyAsync(p->h_out.get(), p->d_out.get(), big, cudaMemcpyDeviceToHost, p->down.get()), "copy");
        }
        for (auto& p : per) {
          check_cuda(cudaSetDevice(p->device), "cudaSetDevice");
          check_cuda(cudaStreamSynchronize(p->up.get()), "copy");
          check_cuda(cudaStreamSynchronize(p->down.get()), "copy");
        }
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        gbs.push_back(static_cast<double>(big) * per.size() * ((h2d ? 1 : 0) + (d2h ? 1 : 0)) / s / 1e9);
      }
      std::sort(gbs.begin(), gbs.end());
      return gbs[gbs.size() / 2];
    };
    const std::string tag = "all_" + std::to_string(devices.size()) + "_gpus_";
    out.emplace_back(tag + "pinned_h2d_GBps", bandwidth(true, false));
    out.emplace_back(tag + "pinned_d2h_GBps", bandwidth(false, true));
    out.emplace_back(tag + "pinned_both_ways_GBps", bandwidth(true, true));
  } catch (const CudaError& e) {
    throw UserError(std::string("GPU transfer probe failed: ") + e.what());
  }
  return out;
}

}  // namespace gcfs
