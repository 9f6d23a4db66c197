// decode_volume_header over arbitrary bytes: the two 4 KiB config slots at the start of a volume
// container, which anyone who can write the container can write (the checksum is no secret).
// Properties: only UserError (a slot of a newer format version) may escape; every copy it returns
// is a parsed volume config from a distinct slot, newest first; what it returns re-encodes to a
// slot that decodes to the same config and generation; and the cost check that runs before any
// scrypt answers for every copy without running it.
#include <cstdint>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "crypto/errors.h"
#include "crypto/vault_config.h"
#include "fs/volume_container.h"
#include "tests/fuzz/fuzz_common.h"

using namespace gcfs;

namespace {

std::vector<std::uint8_t> block_of(const std::vector<std::uint8_t>& slot0, const std::vector<std::uint8_t>& slot1) {
  std::vector<std::uint8_t> b(slot0);
  b.insert(b.end(), slot1.begin(), slot1.end());
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seed_dir()) return 0;
  SecretBytes master;
  VaultConfig c = VaultConfig::create("password", 65536, ScryptParams{10, 8, 1}, VaultKind::Volume, &master);
  c.volume_size = 1 << 30;
  c.seal(master);
  const auto s1 = encode_volume_slot(c, 1);
  fuzz::write_seed("created", block_of(s1, s1));
  VaultConfig grown = c;
  grown.volume_size = 2u << 30;
  grown.seal(master);
  fuzz::write_seed("grown", block_of(s1, encode_volume_slot(grown, 2)));
  VaultConfig costly = c;
  costly.slots.at(0).scrypt = ScryptParams{20, 8, 4};
  fuzz::write_seed("forged-cost", block_of(s1, encode_volume_slot(costly, 9)));
  auto damaged = encode_volume_slot(grown, 2);
  damaged[200] ^= 0x40;
  fuzz::write_seed("one-damaged", block_of(s1, damaged));
  fuzz::write_seed("one-slot", s1);
  VaultConfig slotted = c;
  slotted.add_slot(master, std::string("\0key\nfile", 9), KeySlotKind::KeyFile, ScryptParams{10, 8, 1});
  fuzz::write_seed("two-key-slots", block_of(s1, encode_volume_slot(slotted, 2)));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  VolumeHeader h;
  try {
    h = decode_volume_header(std::span<const std::uint8_t>(data, size));
  } catch (const CorruptData& e) {
    fuzz::fail(std::string("decode_volume_header threw instead of reporting damage: ") + e.what());
  } catch (const UserError&) {
    return 0;  // a slot of a newer format: refused with a message
  }
  if (h.copies.size() + static_cast<std::size_t>(h.empty) > static_cast<std::size_t>(kVolumeSlots))
    fuzz::fail("more copies and empty slots than slots");
  if (h.damage.empty() && h.copies.size() + static_cast<std::size_t>(h.empty) != static_cast<std::size_t>(kVolumeSlots))
    fuzz::fail("a slot is neither a copy, empty nor damaged");
  std::set<int> slots;
  for (std::size_t i = 0; i < h.copies.size(); ++i) {
    const VolumeHeaderCopy& c = h.copies[i];
    if (c.slot < 0 || c.slot >= kVolumeSlots || !slots.insert(c.slot).second) fuzz::fail("bad or repeated slot");
    if (i > 0 && h.copies[i - 1].generation < c.generation) fuzz::fail("copies not newest first");
    if (c.config.kind != VaultKind::Volume) fuzz::fail("accepted a copy that is not a volume config");
    if (!valid_chunk_size(c.config.chunk_size)) fuzz::fail("accepted chunk size " + std::to_string(c.config.chunk_size));
    if (const std::string wrong = fuzz::key_wraps_wrong(c.config); !wrong.empty()) fuzz::fail("accepted " + wrong);
    // The cost check: named exactly when the parameters are beyond what create makes (memory not
    // considered here, so the answer does not depend on the machine).
    for (const ScryptParams& cost : fuzz::kdf_costs(c.config)) {
      const std::string why = kdf_cost_beyond_init(cost, 0);
      const bool beyond = cost.r > kInitScryptR || cost.p > kInitScryptP || cost.log_n > kMaxScryptLogN;
      if (why.empty() == beyond) fuzz::fail("kdf_cost_beyond_init disagrees with init's limits");
    }
    // Round trip: the copy as create or resize would write it decodes to the same thing.
    std::vector<std::uint8_t> slot;
    try {
      slot = encode_volume_slot(c.config, c.generation);
    } catch (const std::runtime_error&) {
      // Compact JSON that parses can be too long pretty-printed (repeated features, say): no
      // gpucryptfs wrote it, and writing it back is refused, never truncated.
      continue;
    }
    const VolumeHeader again = decode_volume_header(slot);
    if (again.copies.size() != 1 || again.copies[0].generation != c.generation ||
        again.copies[0].config.to_json() != c.config.to_json())
      fuzz::fail("encode_volume_slot/decode_volume_header round trip changed the copy");
  }
  return 0;
}
