// Host-side key preparation: round keys, H = E_K(0^128) and the GHASH tables for its powers.
#include <array>
#include <cstring>
#include <vector>

#include "crypto/secret.h"
#include "cuda/gcm_layout.h"
#include "cuda/host_tables.h"

namespace gcfs::gpu {

void build_key_blob(const std::uint8_t key[32], KeyBlob& blob) {
  std::memset(&blob, 0, sizeof blob);
  aes256_expand_key(key, blob.round_keys);
  Block128 h = aes256_encrypt_te0(host_te0().data(), blob.round_keys, Block128{{0, 0, 0, 0}});

  Block128 power = h;  // H^(2^l)
  for (int l = 0; l < kPowerTables; ++l) {
    build_nibble_table(power, blob.tables[l]);
    if (l + 1 < kPowerTables) power = gf_mul_table(power, blob.tables[l]);  // square
  }
  // H^S for S = kSegmentBlocksSmall: squarings of H^32, each through a table of the current power.
  std::vector<std::uint32_t> scratch(kNibbleTableWords);
  static_assert(kSegmentBlocksSmall >= (1u << (kPowerTables - 1)));
  Block128 p = power;  // H^32
  for (std::uint32_t e = 1u << (kPowerTables - 1); e < kSegmentBlocksSmall; e *= 2) {
    build_nibble_table(p, scratch.data());
    p = gf_mul_table(p, scratch.data());
  }
  build_nibble_table(p, scratch.data());  // table of H^S
  blob.segment_power[0] = Block128{{0x80, 0, 0, 0}};  // the field's one: bit 0 = MSB of byte 0
  for (std::uint32_t u = 1; u < kSegmentPowers; ++u)
    blob.segment_power[u] = gf_mul_table(blob.segment_power[u - 1], scratch.data());
  // H and its powers are key material. OPENSSL_cleanse, not memset: a compiler may drop a plain
  // store to memory that is freed right after.
  secure_wipe(scratch.data(), scratch.size() * sizeof(std::uint32_t));
  secure_wipe(&h, sizeof h);
  secure_wipe(&power, sizeof power);
  secure_wipe(&p, sizeof p);
}

}  // namespace gcfs::gpu
