#include "crypto/key_slot.h"

#include "crypto/aes_gcm.h"
#include "crypto/base64url.h"
#include "crypto/config_fields.h"
#include "crypto/errors.h"
#include "crypto/key_ring.h"
#include "crypto/key_slot_json.h"
#include "crypto/random.h"

namespace gcfs {
namespace {

using json = nlohmann::json;
namespace cf = config_fields;

constexpr std::size_t kSaltBytes = 32;

json kdf_json(const KeySlot& s) {
  return {{"name", "scrypt"}, {"log_n", s.scrypt.log_n}, {"r", s.scrypt.r}, {"p", s.scrypt.p}, {"salt", base64_encode(s.salt)}};
}

// What the wrap authenticates besides the key: the slot's own public fields and the config's fixed ones.
std::string associated_data(const KeySlot& s, const json& bound) {
  json aad;
  aad["config"] = bound;
  aad["keyslot"] = {{"slot", s.number}, {"type", key_slot_kind_name(s.kind)}, {"kdf", kdf_json(s)}};
  return aad.dump();
}

std::span<const std::uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

std::string_view key_slot_kind_name(KeySlotKind kind) { return kind == KeySlotKind::KeyFile ? "keyfile" : "password"; }
std::string_view key_slot_kind_words(KeySlotKind kind) { return kind == KeySlotKind::KeyFile ? "key file" : "password"; }

json key_slot_to_json(const KeySlot& s) {
  return {{"slot", s.number},
          {"type", key_slot_kind_name(s.kind)},
          {"kdf", kdf_json(s)},
          {"encrypted_key",
           {{"nonce", base64_encode(s.nonce)}, {"ciphertext", base64_encode(s.wrapped_key)}, {"tag", base64_encode(s.tag)}}}};
}

KeySlot key_slot_from_json(const json& j) {
  if (!j.is_object()) throw CorruptData("a key slot is not an object");
  KeySlot s;
  const std::int64_t number = cf::integer(j, "slot");
  if (number < 0 || number >= kMaxKeySlots)
    throw CorruptData("key slot number " + std::to_string(number) + " is out of range (0 to " +
                      std::to_string(kMaxKeySlots - 1) + ")");
  s.number = static_cast<int>(number);
  const std::string type = cf::string(j, "type");
  if (type == "keyfile") s.kind = KeySlotKind::KeyFile;
  else if (type != "password") throw CorruptData("key slot " + std::to_string(number) + " has the unknown type '" + type + "'");
  const json& kdf = cf::object(j, "kdf");
  if (cf::string(kdf, "name") != "scrypt") throw CorruptData("key slot " + std::to_string(number) + " names an unknown KDF");
  const std::int64_t log_n = cf::integer(kdf, "log_n"), r = cf::integer(kdf, "r"), p = cf::integer(kdf, "p");
  if (log_n < 10 || log_n > 28 || r < 1 || r > 64 || p < 1 || p > 16)
    throw CorruptData("key slot " + std::to_string(number) + " has out-of-range scrypt parameters");
  s.scrypt = {static_cast<int>(log_n), static_cast<int>(r), static_cast<int>(p)};
  s.salt = cf::decode_base64(kdf, "salt");
  if (s.salt.size() < 16) throw CorruptData("key slot " + std::to_string(number) + ": its salt is too short");
  const json& ek = cf::object(j, "encrypted_key");
  const auto nonce = cf::decode_base64(ek, "nonce", s.nonce.size());
  std::copy(nonce.begin(), nonce.end(), s.nonce.begin());
  s.wrapped_key = cf::decode_base64(ek, "ciphertext", kMasterKeyBytes);
  const auto tag = cf::decode_base64(ek, "tag", s.tag.size());
  std::copy(tag.begin(), tag.end(), s.tag.begin());
  return s;
}

void seal_key_slot(KeySlot& s, const SecretBytes& master, std::string_view secret, const json& bound) {
  s.salt.assign(kSaltBytes, 0);
  random_bytes(s.salt);
  random_bytes(s.nonce);
  const SecretBytes kek = scrypt(secret, s.salt, s.scrypt, kGcmKeyBytes);
  const std::string aad = associated_data(s, bound);
  s.wrapped_key.assign(master.size(), 0);
  s.tag = gcm_seal(kek, s.nonce, as_bytes(aad), master, s.wrapped_key.data());
}

std::optional<SecretBytes> open_key_slot(const KeySlot& s, std::string_view secret, const json& bound) {
  const SecretBytes kek = scrypt(secret, s.salt, s.scrypt, kGcmKeyBytes);
  const std::string aad = associated_data(s, bound);
  SecretBytes master(s.wrapped_key.size());
  if (!gcm_open(kek, s.nonce, as_bytes(aad), s.wrapped_key, s.tag, master.data())) return std::nullopt;
  return master;
}

}  // namespace gcfs
