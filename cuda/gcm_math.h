// The arithmetic of AES-256-GCM as the GPU kernels see it, written once for host and device: the
// host builds key schedules and GHASH tables with it, the kernels use the same functions, and the
// unit tests check it against OpenSSL on a machine without a GPU.
//
// Conventions, fixed here and used everywhere in cuda/: a 16-byte block is four 32-bit words
// loaded little-endian (word k = bytes 4k..4k+3, byte 4k at bits 0..7), which is how a GPU reads a
// uint4. AES round keys are stored in the same byte order, so AddRoundKey is a plain XOR. GHASH
// elements use GCM's bit order (bit 0 = most significant bit of byte 0).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define GCFS_HD __host__ __device__ __forceinline__
#else
#define GCFS_HD inline
#endif

namespace gcfs::gpu {

struct Block128 {
  std::uint32_t w[4];
};

GCFS_HD Block128 xor128(const Block128& a, const Block128& b) {
  return {{a.w[0] ^ b.w[0], a.w[1] ^ b.w[1], a.w[2] ^ b.w[2], a.w[3] ^ b.w[3]}};
}

GCFS_HD std::uint32_t bswap32(std::uint32_t x) {
  return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

GCFS_HD Block128 load_block(const std::uint8_t* p) {
  Block128 b;
  for (int k = 0; k < 4; ++k)
    b.w[k] = std::uint32_t(p[4 * k]) | std::uint32_t(p[4 * k + 1]) << 8 | std::uint32_t(p[4 * k + 2]) << 16 |
             std::uint32_t(p[4 * k + 3]) << 24;
  return b;
}

GCFS_HD void store_block(const Block128& b, std::uint8_t* p) {
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 4; ++i) p[4 * k + i] = std::uint8_t(b.w[k] >> (8 * i));
}

// ---- AES ----------------------------------------------------------------------------------------

constexpr int kAesRounds = 14;
constexpr int kRoundKeyWords = 4 * (kAesRounds + 1);  // 60

GCFS_HD std::uint8_t aes_sbox(std::uint8_t x) {
  // Computed, not tabulated, so host and device share one definition without a table in each
  // memory space; only key expansion and table building use it (never the bulk path).
  // Inverse in GF(2^8) by exponentiation x^254, then the affine map.
  auto mul = [](std::uint8_t a, std::uint8_t b) {
    std::uint8_t r = 0;
    for (int i = 0; i < 8; ++i) {
      if (b & 1) r ^= a;
      const bool hi = a & 0x80;
      a = std::uint8_t(a << 1);
      if (hi) a ^= 0x1b;
      b >>= 1;
    }
    return r;
  };
  std::uint8_t inv = 1, base = x;
  for (int e = 254; e; e >>= 1) {  // square-and-multiply; 0 maps to 0
    if (e & 1) inv = mul(inv, base);
    base = mul(base, base);
  }
  auto rotl8 = [](std::uint8_t v, int s) { return std::uint8_t((v << s) | (v >> (8 - s))); };
  return std::uint8_t(inv ^ rotl8(inv, 1) ^ rotl8(inv, 2) ^ rotl8(inv, 3) ^ rotl8(inv, 4) ^ 0x63);
}

GCFS_HD std::uint8_t xtime(std::uint8_t a) { return std::uint8_t((a << 1) ^ ((a & 0x80) ? 0x1b : 0)); }

// Te0 in this file's little-endian word order: bytes (2s, s, s, 3s). Te1..Te3 are Te0 rotated
// left by 8, 16, 24 bits.
GCFS_HD std::uint32_t aes_te0(std::uint8_t x) {
  const std::uint8_t s = aes_sbox(x), s2 = xtime(s), s3 = std::uint8_t(s2 ^ s);
  return std::uint32_t(s2) | std::uint32_t(s) << 8 | std::uint32_t(s) << 16 | std::uint32_t(s3) << 24;
}

GCFS_HD std::uint32_t rotl32(std::uint32_t x, int s) { return (x << s) | (x >> (32 - s)); }

// AES-256 key expansion (FIPS-197 5.2) into 60 little-endian words.
GCFS_HD void aes256_expand_key(const std::uint8_t key[32], std::uint32_t rk[kRoundKeyWords]) {
  for (int i = 0; i < 8; ++i) rk[i] = load_block(key + 16 * (i / 4)).w[i % 4];
  std::uint8_t rcon = 1;
  for (int i = 8; i < kRoundKeyWords; ++i) {
    std::uint32_t t = rk[i - 1];
    if (i % 8 == 0) {
      t = (t >> 8) | (t << 24);  // RotWord in little-endian byte order
      t = std::uint32_t(aes_sbox(t & 0xff)) | std::uint32_t(aes_sbox((t >> 8) & 0xff)) << 8 |
          std::uint32_t(aes_sbox((t >> 16) & 0xff)) << 16 | std::uint32_t(aes_sbox(t >> 24)) << 24;
      t ^= rcon;
      rcon = xtime(rcon);
    } else if (i % 8 == 4) {
      t = std::uint32_t(aes_sbox(t & 0xff)) | std::uint32_t(aes_sbox((t >> 8) & 0xff)) << 8 |
          std::uint32_t(aes_sbox((t >> 16) & 0xff)) << 16 | std::uint32_t(aes_sbox(t >> 24)) << 24;
    }
    rk[i] = rk[i - 8] ^ t;
  }
}

GCFS_HD std::uint8_t byte_of(std::uint32_t w, int k) { return std::uint8_t(w >> (8 * k)); }

// One AES-256 block with a 256-word Te0 table (`te0`), the formulation the kernels use. The
// reference for the kernels and the routine that masks tags (E_K(J0)) on the device.
GCFS_HD Block128 aes256_encrypt_te0(const std::uint32_t* te0, const std::uint32_t rk[kRoundKeyWords], Block128 s) {
  for (int k = 0; k < 4; ++k) s.w[k] ^= rk[k];
  for (int r = 1; r < kAesRounds; ++r) {
    Block128 t;
    for (int c = 0; c < 4; ++c)
      t.w[c] = rk[4 * r + c] ^ te0[byte_of(s.w[c], 0)] ^ rotl32(te0[byte_of(s.w[(c + 1) & 3], 1)], 8) ^
               rotl32(te0[byte_of(s.w[(c + 2) & 3], 2)], 16) ^ rotl32(te0[byte_of(s.w[(c + 3) & 3], 3)], 24);
    s = t;
  }
  Block128 o;
  for (int c = 0; c < 4; ++c)  // S(x) is byte 1 of Te0[x]
    o.w[c] = rk[4 * kAesRounds + c] ^ ((te0[byte_of(s.w[c], 0)] >> 8) & 0xff) ^
             (te0[byte_of(s.w[(c + 1) & 3], 1)] & 0xff00) ^ ((te0[byte_of(s.w[(c + 2) & 3], 2)] << 8) & 0xff0000) ^
             ((te0[byte_of(s.w[(c + 3) & 3], 3)] << 16) & 0xff000000u);
  return o;
}

// GCM counter block for 96-bit nonces: nonce || be32(counter).
GCFS_HD Block128 counter_block(const std::uint32_t nonce[3], std::uint32_t counter) {
  return {{nonce[0], nonce[1], nonce[2], bswap32(counter)}};
}

// ---- GHASH --------------------------------------------------------------------------------------

// X * x in GCM's field: a right shift of the 128-bit big-endian value, reduced by 0xE1 || 0^120.
GCFS_HD Block128 gf_mul_x(const Block128& v) {
  const std::uint32_t b0 = bswap32(v.w[0]), b1 = bswap32(v.w[1]), b2 = bswap32(v.w[2]), b3 = bswap32(v.w[3]);
  const std::uint32_t carry = b3 & 1;
  std::uint32_t n0 = b0 >> 1, n1 = (b1 >> 1) | (b0 << 31), n2 = (b2 >> 1) | (b1 << 31), n3 = (b3 >> 1) | (b2 << 31);
  if (carry) n0 ^= 0xE1000000u;
  return {{bswap32(n0), bswap32(n1), bswap32(n2), bswap32(n3)}};
}

GCFS_HD bool gf_bit(const Block128& x, int i) {  // bit i in GCM order
  const int byte = i >> 3;
  return (x.w[byte >> 2] >> (8 * (byte & 3) + 7 - (i & 7))) & 1;
}

// Bit-serial multiply: slow, but needs no table. The kernels use it once per chunk segment.
GCFS_HD Block128 gf_mul(const Block128& x, Block128 y) {
  Block128 z{{0, 0, 0, 0}};
  for (int i = 0; i < 128; ++i) {
    const std::uint32_t m = 0u - std::uint32_t(gf_bit(x, i));
    for (int k = 0; k < 4; ++k) z.w[k] ^= y.w[k] & m;
    y = gf_mul_x(y);
  }
  return z;
}

// The same product on 64-bit halves in big-endian order: no byte swaps in the loop, so a device
// thread finishes it in about a microsecond. Used once per GHASH segment.
GCFS_HD Block128 gf_mul_u64(const Block128& x, const Block128& y) {
  const std::uint64_t xh = std::uint64_t(bswap32(x.w[0])) << 32 | bswap32(x.w[1]);
  const std::uint64_t xl = std::uint64_t(bswap32(x.w[2])) << 32 | bswap32(x.w[3]);
  std::uint64_t vh = std::uint64_t(bswap32(y.w[0])) << 32 | bswap32(y.w[1]);
  std::uint64_t vl = std::uint64_t(bswap32(y.w[2])) << 32 | bswap32(y.w[3]);
  std::uint64_t zh = 0, zl = 0;
  for (int i = 0; i < 128; ++i) {
    const std::uint64_t bit = i < 64 ? (xh >> (63 - i)) & 1 : (xl >> (127 - i)) & 1;
    const std::uint64_t m = 0 - bit;
    zh ^= vh & m;
    zl ^= vl & m;
    const std::uint64_t carry = 0 - (vl & 1);
    vl = (vl >> 1) | (vh << 63);
    vh = (vh >> 1) ^ (carry & 0xE100000000000000ull);
  }
  return {{bswap32(std::uint32_t(zh >> 32)), bswap32(std::uint32_t(zh)), bswap32(std::uint32_t(zl >> 32)),
           bswap32(std::uint32_t(zl))}};
}

// Multiplication by a fixed P through 32 nibble tables: X*P = XOR over nibble positions p of
// T_p[nibble_p(X)], with T_p[v] = sum over the set bits j of v of P*x^(4p+j). No shifts and no
// reduction in the inner loop, only lookups and XORs.
//
// Memory layout (8 KiB per P), chosen so a warp's loads never conflict: for position p, half h,
// the 16 entries' words (2h, 2h+1) are 16 consecutive 8-byte values at byte offset (2p+h)*128,
// i.e. one 128-byte line, which 32 lanes read in two conflict-free passes whatever their nibbles.
constexpr std::size_t kNibbleTableBytes = 32 * 2 * 128;
constexpr std::size_t kNibbleTableWords = kNibbleTableBytes / 4;

inline void build_nibble_table(const Block128& p, std::uint32_t* table) {
  Block128 basis[128];
  basis[0] = p;
  for (int i = 1; i < 128; ++i) basis[i] = gf_mul_x(basis[i - 1]);
  for (int pos = 0; pos < 32; ++pos) {
    for (int v = 0; v < 16; ++v) {
      Block128 e{{0, 0, 0, 0}};
      for (int j = 0; j < 4; ++j)
        if ((v >> (3 - j)) & 1) e = xor128(e, basis[4 * pos + j]);
      for (int h = 0; h < 2; ++h) {
        std::uint32_t* slot = table + ((2 * pos + h) * 128 + v * 8) / 4;
        slot[0] = e.w[2 * h];
        slot[1] = e.w[2 * h + 1];
      }
    }
  }
}

// Byte offset of nibble position p's entry within its 128-byte line.
GCFS_HD std::uint32_t nibble_offset(const Block128& x, int p) {
  const int byte = p >> 1;
  const int shift = 8 * (byte & 3) + ((p & 1) ? 0 : 4);
  return ((x.w[byte >> 2] >> shift) & 0xF) << 3;
}

GCFS_HD Block128 gf_mul_table(const Block128& x, const std::uint32_t* table) {
  Block128 z{{0, 0, 0, 0}};
  for (int p = 0; p < 32; ++p) {
    const std::uint32_t off = nibble_offset(x, p) / 4;
    const std::uint32_t* lo = table + (2 * p) * 32 + off;
    const std::uint32_t* hi = table + (2 * p + 1) * 32 + off;
    z.w[0] ^= lo[0];
    z.w[1] ^= lo[1];
    z.w[2] ^= hi[0];
    z.w[3] ^= hi[1];
  }
  return z;
}

// A 128-bit field element as two 64-bit halves in big-endian order (hi holds coefficients of x^0
// to x^63, most significant bit first), so that multiplying by x is a right shift.
struct U128 {
  std::uint64_t hi, lo;
};
GCFS_HD U128 to_u128(const Block128& v) {
  return {std::uint64_t(bswap32(v.w[0])) << 32 | bswap32(v.w[1]), std::uint64_t(bswap32(v.w[2])) << 32 | bswap32(v.w[3])};
}
GCFS_HD Block128 from_u128(const U128& v) {
  return {{bswap32(std::uint32_t(v.hi >> 32)), bswap32(std::uint32_t(v.hi)), bswap32(std::uint32_t(v.lo >> 32)),
           bswap32(std::uint32_t(v.lo))}};
}
// v >> k (0 <= k < 128) and the k bits shifted out, aligned to the top (they are the coefficients
// of x^128 .. x^(127+k) of v * x^k, as an element times x^128).
GCFS_HD void shr128(const U128& v, int k, U128* kept, U128* out) {
  if (k == 0) {
    *kept = v, *out = {0, 0};
  } else if (k < 64) {
    *kept = {v.hi >> k, (v.lo >> k) | (v.hi << (64 - k))};
    *out = {v.lo << (64 - k), 0};
  } else if (k == 64) {
    *kept = {0, v.hi}, *out = {v.lo, 0};
  } else {
    *kept = {0, v.hi >> (k - 64)};
    *out = {(v.lo >> (k - 64)) | (v.hi << (128 - k)), v.lo << (128 - k)};
  }
}
// o * x^128 mod P = o * (1 + x + x^2 + x^7), for o of degree below 121 (nothing falls off).
GCFS_HD U128 fold_small(const U128& o) {
  U128 r = o, t, f;
  const int shifts[3] = {1, 2, 7};
  for (int i = 0; i < 3; ++i) {
    shr128(o, shifts[i], &t, &f);
    r.hi ^= t.hi, r.lo ^= t.lo;
  }
  return r;
}
// v * x^k in the field, 0 <= k < 128, in constant time: two folds of the bits that overflow.
GCFS_HD U128 mul_xk(const U128& v, int k) {
  U128 kept, out;
  shr128(v, k, &kept, &out);
  // out * (1 + x + x^2 + x^7): out has degree below k; what passes x^127 again (only for k > 121)
  // has degree below 7 and folds once more without overflow.
  U128 r = out, t, f, spill{0, 0};
  const int shifts[3] = {1, 2, 7};
  for (int i = 0; i < 3; ++i) {
    shr128(out, shifts[i], &t, &f);
    r.hi ^= t.hi, r.lo ^= t.lo;
    spill.hi ^= f.hi, spill.lo ^= f.lo;
  }
  const U128 s = fold_small(spill);
  return {kept.hi ^ r.hi ^ s.hi, kept.lo ^ r.lo ^ s.lo};
}
// One warp lane's share of x * y: lane i (0..31) takes bits 4i..4i+3 of x (GCM order). The XOR of
// all 32 lanes' shares is x * y; a warp computes a product in a few hundred instructions instead
// of the bit-serial loop's two thousand.
GCFS_HD Block128 gf_mul_lane_share(const Block128& x, const Block128& y, int lane) {
  U128 v = mul_xk(to_u128(y), 4 * lane), z{0, 0};
  const U128 xx = to_u128(x);
  const std::uint64_t word = lane < 16 ? xx.hi : xx.lo;
  const int top = 63 - 4 * (lane & 15);  // bit 4*lane of x within its half
  for (int j = 0; j < 4; ++j) {
    const std::uint64_t m = 0 - ((word >> (top - j)) & 1);
    z.hi ^= v.hi & m, z.lo ^= v.lo & m;
    const std::uint64_t carry = 0 - (v.lo & 1);
    v.lo = (v.lo >> 1) | (v.hi << 63);
    v.hi = (v.hi >> 1) ^ (carry & 0xE100000000000000ull);
  }
  return from_u128(z);
}

// The GCM length block: be64(aad bits) || be64(ciphertext bits).
GCFS_HD Block128 length_block(std::uint64_t aad_bytes, std::uint64_t text_bytes) {
  const std::uint64_t a = aad_bytes * 8, c = text_bytes * 8;
  return {{bswap32(std::uint32_t(a >> 32)), bswap32(std::uint32_t(a)), bswap32(std::uint32_t(c >> 32)),
           bswap32(std::uint32_t(c))}};
}

}  // namespace gcfs::gpu
