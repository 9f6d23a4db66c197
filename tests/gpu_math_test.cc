// The GPU kernels' arithmetic, run as host code and checked against OpenSSL: AES-256 through the
// T-table formulation, GHASH through nibble tables, and the exact segment/lane/tree decomposition
// the GHASH kernel uses. Needs no GPU (and no CUDA), so every CI run exercises the cipher math.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "crypto/cpu_engine.h"
#include "cuda/batch_layout.h"
#include "cuda/gcm_layout.h"
#include "cuda/host_tables.h"

namespace gcfs::gpu {
namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 r(20261122);
  return r;
}

void fill(std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(rng()());
}

Block128 openssl_aes256(const std::uint8_t key[32], const std::uint8_t in[16]) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  std::uint8_t out[32];
  int n = 0;
  EXPECT_EQ(EVP_EncryptInit_ex(ctx, EVP_aes_256_ecb(), nullptr, key, nullptr), 1);
  EVP_CIPHER_CTX_set_padding(ctx, 0);
  EXPECT_EQ(EVP_EncryptUpdate(ctx, out, &n, in, 16), 1);
  EVP_CIPHER_CTX_free(ctx);
  return load_block(out);
}

TEST(GpuMath, SboxMatchesFips197) {
  EXPECT_EQ(aes_sbox(0x00), 0x63);
  EXPECT_EQ(aes_sbox(0x53), 0xed);
  EXPECT_EQ(aes_sbox(0xff), 0x16);
}

TEST(GpuMath, Aes256TTableMatchesOpenssl) {
  for (int trial = 0; trial < 200; ++trial) {
    std::uint8_t key[32], in[16];
    fill(key, 32);
    fill(in, 16);
    std::uint32_t rk[kRoundKeyWords];
    aes256_expand_key(key, rk);
    const Block128 ours = aes256_encrypt_te0(host_te0().data(), rk, load_block(in));
    const Block128 ref = openssl_aes256(key, in);
    ASSERT_EQ(std::memcmp(ours.w, ref.w, 16), 0) << "trial " << trial;
  }
}

TEST(GpuMath, NibbleTableMultiplyMatchesBitSerial) {
  std::vector<std::uint32_t> table(kNibbleTableWords);
  for (int trial = 0; trial < 50; ++trial) {
    std::uint8_t a[16], b[16];
    fill(a, 16);
    fill(b, 16);
    const Block128 x = load_block(a), p = load_block(b);
    build_nibble_table(p, table.data());
    const Block128 ref = gf_mul(x, p);
    const Block128 t = gf_mul_table(x, table.data());
    const Block128 u = gf_mul_u64(x, p);
    ASSERT_EQ(std::memcmp(ref.w, t.w, 16), 0);
    ASSERT_EQ(std::memcmp(ref.w, u.w, 16), 0);
  }
}

// The warp-shared multiply: lane i's share covers bits 4i..4i+3 of x, through y * x^(4i), which
// mul_xk computes in constant time; the 32 shares XOR to the product. Edge cases: the field's one,
// x^127 (the last bit, where the reduction folds twice), and all-ones operands.
TEST(GpuMath, LaneSharedMultiplyMatchesBitSerial) {
  std::vector<Block128> xs, ys;
  for (int trial = 0; trial < 200; ++trial) {
    std::uint8_t a[16], b[16];
    fill(a, 16);
    fill(b, 16);
    xs.push_back(load_block(a));
    ys.push_back(load_block(b));
  }
  const Block128 one{{0x80, 0, 0, 0}}, last_bit{{0, 0, 0, 0x01000000u}}, ones{{~0u, ~0u, ~0u, ~0u}};
  for (const Block128& e : {one, last_bit, ones}) {
    xs.push_back(e), ys.push_back(ys[0]);
    xs.push_back(xs[0]), ys.push_back(e);
  }
  xs.push_back(ones), ys.push_back(ones);
  for (std::size_t t = 0; t < xs.size(); ++t) {
    Block128 sum{{0, 0, 0, 0}};
    for (int lane = 0; lane < 32; ++lane) sum = xor128(sum, gf_mul_lane_share(xs[t], ys[t], lane));
    const Block128 ref = gf_mul(xs[t], ys[t]);
    ASSERT_EQ(std::memcmp(ref.w, sum.w, 16), 0) << "pair " << t;
  }
  // y * x^k for every k against k single steps
  U128 v = to_u128(ys[1]);
  Block128 step = ys[1];
  for (int k = 0; k < 128; ++k) {
    const Block128 direct = from_u128(mul_xk(v, k));
    ASSERT_EQ(std::memcmp(direct.w, step.w, 16), 0) << "k = " << k;
    step = gf_mul_x(step);
  }
}

// The GHASH kernel's algorithm, step for step (segments from the end, lanes every 32nd block with
// H^32, the shuffle permutation and the 5-level tree), with warp shuffles emulated.
Block128 emulate_ghash(const KeyBlob& kb, const std::uint8_t* aad, std::uint32_t aad_len, const std::uint8_t* text,
                       std::uint32_t len, std::uint32_t seg_blocks) {
  const std::uint32_t aad_blocks = blocks_of(aad_len), text_blocks = blocks_of(len);
  const std::uint32_t total = aad_blocks + text_blocks + 1;
  auto input = [&](std::uint32_t j) {
    std::uint8_t buf[16] = {};
    if (j < aad_blocks) {
      std::memcpy(buf, aad + 16 * j, std::min<std::uint32_t>(16, aad_len - 16 * j));
      return load_block(buf);
    }
    if (j < aad_blocks + text_blocks) {
      const std::uint32_t i = j - aad_blocks;
      std::memcpy(buf, text + 16 * i, std::min<std::uint32_t>(16, len - 16 * i));
      return load_block(buf);
    }
    return length_block(aad_len, len);
  };
  const std::uint32_t nseg = ghash_segments(aad_len, len, seg_blocks);
  Block128 acc{{0, 0, 0, 0}};
  for (std::uint32_t u = 0; u < nseg; ++u) {
    std::uint32_t begin, end;
    segment_range(total, nseg, u, seg_blocks, &begin, &end);
    const std::uint32_t m = end - begin;
    std::array<Block128, 32> z{};
    for (std::uint32_t lane = 0; lane < 32; ++lane) {
      std::uint32_t j = begin + lane;
      if (j >= end) continue;
      z[lane] = input(j);
      for (j += 32; j < end; j += 32) z[lane] = xor128(gf_mul_table(z[lane], kb.tables[5]), input(j));
    }
    std::array<Block128, 32> a{};
    for (std::uint32_t lane = 0; lane < 32; ++lane) a[lane] = z[(m - 1 - lane) & 31];
    for (int l = 0; l < 5; ++l) {
      std::array<Block128, 32> next{};
      for (int lane = 0; lane < 32; ++lane) {
        const int src = lane + (1 << l) < 32 ? lane + (1 << l) : lane;
        next[lane] = xor128(a[lane], gf_mul_table(a[src], kb.tables[l]));
      }
      a = next;
    }
    Block128 y = gf_mul_table(a[0], kb.tables[0]);
    if (u > 0) {  // the warp's shared product: the XOR of the 32 lanes' shares
      const Block128 p = kb.segment_power[u * (seg_blocks / kSegmentBlocksSmall)];
      Block128 sum{{0, 0, 0, 0}};
      for (int lane = 0; lane < 32; ++lane) sum = xor128(sum, gf_mul_lane_share(y, p, lane));
      y = sum;
    }
    acc = xor128(acc, y);
  }
  return acc;
}

void emulate_seal(const std::uint8_t key[32], const std::array<std::uint8_t, 12>& nonce, const std::uint8_t* aad,
                  std::uint32_t aad_len, const std::uint8_t* in, std::uint8_t* out, std::uint32_t len,
                  std::uint8_t tag[16], std::uint32_t seg_blocks) {
  auto kb = std::make_unique<KeyBlob>();
  build_key_blob(key, *kb);
  std::uint32_t n[3];
  std::memcpy(n, nonce.data(), 12);
  const auto& te0 = host_te0();
  for (std::uint32_t i = 0; 16 * i < len; ++i) {
    std::uint8_t ks[16];
    store_block(aes256_encrypt_te0(te0.data(), kb->round_keys, counter_block(n, i + 2)), ks);
    for (std::uint32_t k = 0; k < 16 && 16 * i + k < len; ++k) out[16 * i + k] = in[16 * i + k] ^ ks[k];
  }
  const Block128 s = emulate_ghash(*kb, aad, aad_len, out, len, seg_blocks);
  store_block(xor128(s, aes256_encrypt_te0(te0.data(), kb->round_keys, counter_block(n, 1))), tag);
}

TEST(GpuMath, EmulatedKernelSealMatchesOpenssl) {
  const std::vector<std::uint32_t> lengths = {0,     1,     15,    16,    17,    31,    511,   512,   513,
                                              4095,  4096,  16368, 16384, 16400, 32768, 65536, 65535, 131072,
                                              262144, 1u << 20};
  for (std::uint32_t len : lengths) {
    for (std::uint32_t aad_len : {0u, 1u, 16u, 24u, 33u, 64u}) {
      ChunkKey key;
      fill(key.data(), 32);
      std::vector<std::uint8_t> in(len + 1), out(len + 1), ref(len + 1), aad(64);
      fill(in.data(), len);
      fill(aad.data(), 64);
      ChunkOp op;
      op.key = &key;
      fill(op.nonce.data(), 12);
      op.aad = aad.data();
      op.aad_len = aad_len;
      op.in = in.data();
      op.out = ref.data();
      op.len = len;
      cpu_seal_one(op);
      for (std::uint32_t seg : {kSegmentBlocksSmall, kSegmentBlocksLarge}) {
        std::uint8_t tag[16];
        emulate_seal(key.data(), op.nonce, aad.data(), aad_len, in.data(), out.data(), len, tag, seg);
        ASSERT_EQ(std::memcmp(out.data(), ref.data(), len), 0) << "len " << len << " aad " << aad_len;
        ASSERT_EQ(std::memcmp(tag, op.tag.data(), 16), 0) << "len " << len << " aad " << aad_len << " seg " << seg;
      }
      if (len > 70000) break;  // the largest sizes once: the emulation is slow
    }
  }
}

TEST(GpuMath, SegmentsCoverTheStreamOnceAndFitThePowerTable) {
  for (std::uint32_t len : {0u, 16u, 8000u, 16368u, 16384u, 24560u, 65536u, 1u << 20}) {
    for (std::uint32_t aad : {0u, 24u, 64u}) {
     for (std::uint32_t seg : {kSegmentBlocksSmall, kSegmentBlocksLarge}) {
      const std::uint32_t total = ghash_stream_blocks(aad, len), nseg = ghash_segments(aad, len, seg);
      ASSERT_GE(nseg, 1u);
      ASSERT_LE((nseg - 1) * (seg / kSegmentBlocksSmall), kSegmentPowers - 1);  // the power table reaches
      std::uint32_t covered = 0, prev_begin = total;
      for (std::uint32_t u = 0; u < nseg; ++u) {
        std::uint32_t b, e;
        segment_range(total, nseg, u, seg, &b, &e);
        ASSERT_EQ(e, prev_begin);
        ASSERT_LT(b, e);
        ASSERT_LE(e - b, seg + seg / 2);
        covered += e - b;
        prev_begin = b;
      }
      ASSERT_EQ(prev_begin, 0u);
      ASSERT_EQ(covered, total);
     }
    }
  }
}

// A chunk split over n CTAs of the resident worker: the parts' segments partition the chunk's
// segments in order, their text blocks partition the text's blocks in order, and every text block a
// part's segments hash lies in that part's own blocks (the CTR it did itself, in its own buffer).
TEST(GpuMath, ResidentPartsHashExactlyTheBlocksTheyEncrypt) {
  for (std::uint32_t len : {1u, 17u, 2048u, 4096u, 4097u, 8191u, 16384u, 32784u, 65535u, 65536u, 300000u, 1u << 20}) {
    for (std::uint32_t aad : {0u, 1u, 24u, 33u, 64u}) {
      const std::uint32_t total = ghash_stream_blocks(aad, len), aad_blocks = blocks_of(aad), text_blocks = blocks_of(len);
      for (std::uint32_t n = 1; n <= kResidentMaxParts; ++n) {
        const std::uint32_t s = resident_segment_blocks(n), segs = ghash_segments(aad, len, s);
        if (n > segs) break;  // the host never splits further
        std::uint32_t next_seg = 0, next_blk = 0;
        for (std::uint32_t p = 0; p < n; ++p) {
          std::uint32_t sb, se, bb, be;
          resident_part_range(aad, len, p, n, &sb, &se, &bb, &be);
          SCOPED_TRACE("len " + std::to_string(len) + " aad " + std::to_string(aad) + " part " + std::to_string(p) +
                       " of " + std::to_string(n));
          ASSERT_EQ(sb, next_seg);
          ASSERT_LT(sb, se);
          ASSERT_EQ(bb, next_blk);
          for (std::uint32_t seg = sb; seg < se; ++seg) {
            std::uint32_t b, e;
            segment_range(total, segs, segs - 1 - seg, s, &b, &e);
            for (std::uint32_t j = b; j < e; ++j)
              if (j >= aad_blocks && j - aad_blocks < text_blocks) {
                ASSERT_GE(j - aad_blocks, bb);
                ASSERT_LT(j - aad_blocks, be);
              }
          }
          next_seg = se;
          next_blk = be;
        }
        ASSERT_EQ(next_seg, segs);
        ASSERT_EQ(next_blk, text_blocks);
      }
    }
  }
  EXPECT_EQ(resident_parts_of(resident_part_flags(3, 7) | kResidentInPlace), 7u);
  EXPECT_EQ(resident_part_of(resident_part_flags(3, 7) | kResidentInPlace), 3u);
  EXPECT_EQ(resident_parts_of(kResidentInPlace), 1u);  // not split
}

TEST(GpuMath, PackBatchLaysOutChunksAlignedWithPrefixSums) {
  ChunkKey key;
  std::vector<std::uint8_t> data(5000), aad(64, 0xab);
  fill(data.data(), data.size());
  std::vector<ChunkOp> ops(3);
  const std::size_t lens[3] = {17, 0, 4096};
  std::size_t off = 0;
  std::vector<ChunkOp*> ptrs;
  for (int i = 0; i < 3; ++i) {
    ops[i].key = &key;
    ops[i].in = data.data() + off;
    ops[i].len = lens[i];
    ops[i].aad = aad.data();
    ops[i].aad_len = 24;
    off += lens[i];
    ptrs.push_back(&ops[i]);
  }
  std::vector<std::uint32_t> keys(3, 0);
  std::vector<unsigned char> header(header_capacity(3) + 8192, 0xCC);
  const BatchPlan plan = pack_batch(ptrs, keys, 32, kSegmentBlocksLarge, false, header.data());
  const unsigned char* area = header.data() + plan.data_offset;
  const auto* d = reinterpret_cast<const ChunkDesc*>(header.data());
  EXPECT_EQ(d[0].data_offset, 0u);
  EXPECT_EQ(d[1].data_offset, 32u);
  EXPECT_EQ(d[2].data_offset, 32u);
  EXPECT_EQ(plan.data_bytes, 32u + 4096u);
  EXPECT_EQ(plan.ctr_data_tasks, 1u + 0u + 8u);
  EXPECT_EQ(plan.ctr_tasks, 9u + 1u);  // one tag-mask task covers up to 32 chunks
  EXPECT_EQ(plan.segments, 3u);
  EXPECT_EQ(plan.data_offset % 256, 0u);
  EXPECT_LE(plan.data_offset, header_capacity(3));
  EXPECT_EQ(std::memcmp(area + 32, data.data() + 17, 4096), 0);
  for (std::size_t i = 0; i < 3 * sizeof(ChunkScratch); ++i) ASSERT_EQ(header[plan.scratch_offset + i], 0) << i;
  const auto* tp = reinterpret_cast<const std::uint32_t*>(header.data() + plan.task_prefix_offset);
  EXPECT_EQ(tp[0], 0u);
  EXPECT_EQ(tp[1], 1u);
  EXPECT_EQ(tp[2], 1u);
  EXPECT_EQ(tp[3], 9u);
  EXPECT_EQ(std::memcmp(d[0].aad, aad.data(), 24), 0);
  EXPECT_EQ(d[0].aad[24], 0);
}

}  // namespace
}  // namespace gcfs::gpu
