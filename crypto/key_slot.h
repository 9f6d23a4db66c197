// A key slot: one way into a vault (docs/FORMAT.md, "Key slots"). Each slot wraps the same master
// key with AES-256-GCM under a key that scrypt derives from its own secret: a password, or the
// whole content of a key file (fed to scrypt as a password is, as LUKS feeds a key file to its
// KDF). A config of version 2 holds 1 to kMaxKeySlots of them; any one opens the vault, and each
// can be added or removed without the others' secrets.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "crypto/kdf.h"

namespace gcfs {

// At most this many slots (LUKS2's number): unlocking may run one scrypt per slot, so a config
// with more is refused as damaged rather than tried.
constexpr int kMaxKeySlots = 32;
// A key file's content is the secret: 1 byte to 8 MiB (cryptsetup's default limit), any bytes.
constexpr std::size_t kMaxKeyFileBytes = std::size_t{8} << 20;

enum class KeySlotKind { Password, KeyFile };

// "password" or "keyfile": the slot's "type" in the config, and what `keyslot list` prints.
std::string_view key_slot_kind_name(KeySlotKind kind);
// "password" or "key file": for messages.
std::string_view key_slot_kind_words(KeySlotKind kind);

struct KeySlot {
  int number = 0;  // 0 to kMaxKeySlots - 1; stable: removing a slot renumbers no other
  KeySlotKind kind = KeySlotKind::Password;
  ScryptParams scrypt;
  std::vector<std::uint8_t> salt;
  std::array<std::uint8_t, 12> nonce{};
  std::vector<std::uint8_t> wrapped_key;
  std::array<std::uint8_t, 16> tag{};
};

}  // namespace gcfs
