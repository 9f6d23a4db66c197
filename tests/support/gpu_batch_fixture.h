// What the gpu engine tests share (tests/gpu_engine_test.cc, gpu_engine_fallback_test.cc,
// engine_factory_test.cc): batches of random chunks sealed beside the cpu engine, the lengths
// worth trying, and many callers at once counted against the cpu engine.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "crypto/cpu_engine.h"
#include "crypto/errors.h"
#include "crypto/hybrid_engine.h"
#include "crypto/size_routed_engine.h"
#include "cuda/gpu_engine.h"
#include "mount/engines/engine_factory.h"

namespace gcfs::gpu_test {

inline std::mt19937_64& rng() {
  thread_local std::mt19937_64 r(std::random_device{}());
  return r;
}

inline void fill(std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(rng()());
}

// A batch of ops with its own buffers: plaintext, the cpu engine's ciphertext, the gpu's.
struct Batch {
  std::vector<ChunkKey> keys;
  std::vector<std::vector<std::uint8_t>> plain, aad, ref, out;
  std::vector<ChunkOp> ref_ops, ops;

  Batch(const std::vector<std::size_t>& lengths, std::size_t distinct_keys) : keys(distinct_keys) {
    for (auto& k : keys) fill(k.data(), 32);
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      plain.emplace_back(lengths[i]);
      fill(plain.back().data(), lengths[i]);
      aad.emplace_back(rng()() % (kMaxChunkAadBytes + 1));
      fill(aad.back().data(), aad.back().size());
      ref.emplace_back(lengths[i]);
      out.emplace_back(lengths[i]);
    }
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      ChunkOp op;
      op.key = &keys[rng()() % keys.size()];
      fill(op.nonce.data(), op.nonce.size());
      op.aad = aad[i].data();
      op.aad_len = aad[i].size();
      op.in = plain[i].data();
      op.len = lengths[i];
      op.out = ref[i].data();
      ref_ops.push_back(op);
      op.out = out[i].data();
      ops.push_back(op);
    }
  }

  void expect_same_seal() const {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      ASSERT_EQ(ref[i], out[i]) << "ciphertext of chunk " << i << " (" << ops[i].len << " bytes)";
      ASSERT_EQ(ref_ops[i].tag, ops[i].tag) << "tag of chunk " << i << " (" << ops[i].len << " bytes)";
    }
  }

  // Turns the gpu-sealed ops into open ops that decrypt into fresh buffers.
  std::vector<std::vector<std::uint8_t>> prepare_open() {
    std::vector<std::vector<std::uint8_t>> back(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      back[i].assign(ops[i].len, 0xEE);
      ops[i].in = out[i].data();
      ops[i].out = back[i].data();
      ops[i].ok = false;
    }
    return back;
  }
};

inline std::vector<std::size_t> interesting_lengths() {
  std::vector<std::size_t> l = {0, 1, 15, 16, 17, 4095, 100, 65535, 24};
  for (std::size_t s = 4096; s <= (1u << 20); s *= 2) l.push_back(s);
  return l;
}

// Seals and opens batches from several callers at once (pinned buffers and ordinary memory, 64 KiB
// and odd lengths) and counts the chunks that differ from the cpu engine or do not open back.
inline int mismatches_from_callers(ChunkEngine& engine, int callers, int rounds) {
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t)
    threads.emplace_back([&, t] {
      CpuEngine reference(1);
      for (int r = 0; r < rounds; ++r) {
        std::vector<std::size_t> lens(8 + (t + r) % 24, 65536);
        lens.push_back(4097);
        Batch b(lens, 2);
        reference.seal(b.ref_ops);
        engine.seal(b.ops);
        for (std::size_t i = 0; i < b.ops.size(); ++i)
          if (b.ref[i] != b.out[i] || b.ref_ops[i].tag != b.ops[i].tag) ++bad;
        auto back = b.prepare_open();
        engine.open(b.ops);
        for (std::size_t i = 0; i < b.ops.size(); ++i)
          if (!b.ops[i].ok || back[i] != b.plain[i]) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  return bad.load();
}


}  // namespace gcfs::gpu_test
