#include "crypto/vault_config.h"

#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "crypto/aes_gcm.h"
#include "crypto/base64url.h"
#include "crypto/errors.h"
#include "crypto/config_fields.h"
#include "crypto/key_ring.h"
#include "crypto/key_slot_json.h"
#include "crypto/random.h"
#include "crypto/vault_config_json.h"

namespace gcfs {
namespace {

using json = nlohmann::json;
namespace cf = config_fields;

const std::vector<std::string> kFeatures = {kDirIvFeature, "long_names", "hkdf_file_keys", "siv_names", "holes"};

std::span<const std::uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

SecretBytes wrapping_key(const VaultConfig& c, std::string_view password) {
  return scrypt(password, c.salt, c.scrypt, kGcmKeyBytes);
}

// "384 MiB", "256 GiB": memory sizes for the cost messages.
std::string memory_text(std::uint64_t bytes) {
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
  if (bytes % kGiB == 0 || bytes >= 10 * kGiB) return std::to_string((bytes + kGiB - 1) / kGiB) + " GiB";
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB";
}

}  // namespace

json fixed_fields(const VaultConfig& c) {
  json j;
  j["format"] = "gpucryptfs";
  j["version"] = c.version;
  if (c.has_key_slots()) j["config_version"] = c.config_version;
  j["kind"] = c.kind == VaultKind::Volume ? "volume" : "directory";
  j["cipher"] = c.cipher;
  j["chunk_size"] = c.chunk_size;
  j["features"] = c.features;
  if (c.long_name_max) j["long_name_max"] = c.long_name_max;
  return j;
}

json public_fields(const VaultConfig& c) {
  json j = fixed_fields(c);
  if (c.kind == VaultKind::Volume) j["volume_size"] = c.volume_size;
  if (!c.has_key_slots())
    j["kdf"] = {{"name", "scrypt"}, {"log_n", c.scrypt.log_n}, {"r", c.scrypt.r}, {"p", c.scrypt.p},
                {"salt", base64_encode(c.salt)}};
  return j;
}

std::uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

std::string kdf_cost_beyond_init(const ScryptParams& params, std::uint64_t machine_memory) {
  const std::string cost = "scrypt N=2^" + std::to_string(params.log_n) + ", r=" + std::to_string(params.r) +
                           ", p=" + std::to_string(params.p);
  if (params.log_n > kMaxScryptLogN || params.r > kInitScryptR || params.p > kInitScryptP)
    return cost + ", above the most `init` creates (N=2^" + std::to_string(kMaxScryptLogN) + " at most, with r=" +
           std::to_string(kInitScryptR) + " and p=" + std::to_string(kInitScryptP) + ")";
  // scrypt's working memory is 128 * r * N bytes (OpenSSL adds 128 * r * (p + 2)). Within init's
  // range N may still be 2^28 (256 GiB at r = 8): a cost nobody chose for a machine that small.
  const std::uint64_t memory = (std::uint64_t{128} * static_cast<std::uint64_t>(params.r)) << params.log_n;
  if (machine_memory != 0 && memory > machine_memory / 2)
    return cost + ", which needs " + memory_text(memory) + " of memory, more than half of this machine's " +
           memory_text(machine_memory);
  return "";
}

bool valid_chunk_size(std::uint64_t n) {
  return n >= kMinChunkSize && n <= kMaxChunkSize && (n & (n - 1)) == 0;
}

VaultConfig VaultConfig::create(std::string_view secret, std::uint32_t chunk_size, const ScryptParams& params,
                                VaultKind kind, SecretBytes* master_out, int format, KeySlotKind slot_kind,
                                std::uint32_t long_name_max, bool deterministic_names) {
  if (!valid_chunk_size(chunk_size))
    throw UserError("chunk size must be a power of two from 4096 to 1048576 bytes, got " + std::to_string(chunk_size));
  if (format < 1 || format > kMaxFormatVersion || (kind == VaultKind::Volume && format != 1))
    throw UserError("format " + std::to_string(format) + " is not one this gpucryptfs creates" +
                    (kind == VaultKind::Volume ? " for a volume (volumes are format 1)" : ""));
  VaultConfig c = defaults(chunk_size, kind, format);
  if (long_name_max != 0) {  // before the slot: its wrap authenticates the fixed fields
    if (long_name_max < kMinLongNameMax || long_name_max > kMaxLongNameMax || kind != VaultKind::Directory)
      throw UserError("the longest backing name must be from " + std::to_string(kMinLongNameMax) + " to " +
                      std::to_string(kMaxLongNameMax) + " bytes (directory vaults only), got " + std::to_string(long_name_max));
    c.long_name_max = long_name_max;
    c.features.push_back(kLongNameMaxFeature);
  }
  if (deterministic_names) c.use_deterministic_names();  // also before the slot, for the same reason
  c.scrypt = params;
  SecretBytes master(kMasterKeyBytes);
  random_bytes(master);
  c.add_slot(master, secret, slot_kind, params);
  if (master_out) *master_out = std::move(master);
  return c;
}

VaultConfig VaultConfig::defaults(std::uint32_t chunk_size, VaultKind kind, int format) {
  VaultConfig c;
  c.version = format;
  c.kind = kind;
  c.chunk_size = chunk_size;
  c.features = kFeatures;
  c.config_version = kConfigVersionKeySlots;
  return c;
}

void VaultConfig::use_deterministic_names() {
  if (kind != VaultKind::Directory) throw UserError("deterministic names are for directory vaults only");
  std::replace(features.begin(), features.end(), std::string(kDirIvFeature), std::string(kDeterministicNamesFeature));
  if (!has_deterministic_names()) features.push_back(kDeterministicNamesFeature);
}

void VaultConfig::rewrap(const SecretBytes& master, std::string_view new_password) {
  if (has_key_slots()) {
    if (slots.empty()) add_slot(master, new_password, KeySlotKind::Password, scrypt);
    else if (slots.size() == 1) rewrap_slot(slots.front().number, master, new_password, KeySlotKind::Password);
    else throw UserError("the config has " + std::to_string(slots.size()) + " key slots: say which one to change");
    return;
  }
  salt.assign(32, 0);
  random_bytes(salt);
  random_bytes(key_nonce);
  SecretBytes kek = wrapping_key(*this, new_password);
  const std::string aad = authenticated_fields();
  wrapped_key.assign(master.size(), 0);
  key_tag = gcm_seal(kek, key_nonce, as_bytes(aad), master, wrapped_key.data());
}

void VaultConfig::check_kdf_cost(KdfPolicy policy) const {
  if (policy == KdfPolicy::AllowExpensive) return;
  const std::uint64_t memory = machine_memory_bytes();
  auto refuse = [](const std::string& where, const std::string& why) {
    throw ExpensiveKdf(where + " asks for " + why +
                       "; refused before running it, since anyone who can write the config can set it "
                       "(pass --allow-expensive-kdf if you made it so)");
  };
  if (!has_key_slots()) {
    if (const std::string why = kdf_cost_beyond_init(scrypt, memory); !why.empty()) refuse("the config", why);
    return;
  }
  for (const KeySlot& s : slots)
    if (const std::string why = kdf_cost_beyond_init(s.scrypt, memory); !why.empty())
      refuse("key slot " + std::to_string(s.number) + " of the config", why);
}

SecretBytes VaultConfig::unlock(std::string_view password, KdfPolicy policy, KeySlotKind kind, int* opened_slot) const {
  check_kdf_cost(policy);
  if (has_key_slots()) return unlock_slots(*this, password, kind, opened_slot);
  if (opened_slot) *opened_slot = -1;
  if (kind == KeySlotKind::KeyFile)
    throw WrongPassword("a key file opens key slots only, and this config (version 1, from before key slots) has a "
                        "password alone: unlock with the password");
  SecretBytes kek = wrapping_key(*this, password);
  const std::string aad = authenticated_fields();
  SecretBytes master(wrapped_key.size());
  if (!gcm_open(kek, key_nonce, as_bytes(aad), wrapped_key, key_tag, master.data()))
    throw WrongPassword("wrong password (or the stored configuration's fields were edited: its authentication failed)");
  return master;
}

std::string VaultConfig::to_json(int indent) const {
  json j = public_fields(*this);
  if (has_key_slots()) {
    j["keyslots"] = json::array();
    for (const KeySlot& s : slots) j["keyslots"].push_back(key_slot_to_json(s));
    j["digest"] = base64_encode(digest);
  } else {
    j["encrypted_key"] = {{"nonce", base64_encode(key_nonce)},
                          {"ciphertext", base64_encode(wrapped_key)},
                          {"tag", base64_encode(key_tag)}};
  }
  return j.dump(indent) + "\n";
}

namespace {

void read_single_key(const json& j, VaultConfig& c) {
  const json& kdf = cf::object(j, "kdf");
  if (cf::string(kdf, "name") != "scrypt") throw CorruptData("config names an unknown KDF");
  const std::int64_t log_n = cf::integer(kdf, "log_n"), r = cf::integer(kdf, "r"), p = cf::integer(kdf, "p");
  if (log_n < kMinScryptLogN || log_n > kMaxScryptLogN || r < 1 || r > 64 || p < 1 || p > 16)
    throw CorruptData("config has out-of-range scrypt parameters");
  c.scrypt.log_n = static_cast<int>(log_n);
  c.scrypt.r = static_cast<int>(r);
  c.scrypt.p = static_cast<int>(p);
  c.salt = cf::decode_base64(kdf, "salt");
  if (c.salt.size() < 16) throw CorruptData("config field 'salt' is too short");
  const json& ek = cf::object(j, "encrypted_key");
  auto nonce = cf::decode_base64(ek, "nonce", 12);
  std::copy(nonce.begin(), nonce.end(), c.key_nonce.begin());
  c.wrapped_key = cf::decode_base64(ek, "ciphertext", kMasterKeyBytes);
  auto tag = cf::decode_base64(ek, "tag", 16);
  std::copy(tag.begin(), tag.end(), c.key_tag.begin());
}

// Bounded before anything is tried: each slot may cost one scrypt at unlock.
void read_key_slots(const json& j, VaultConfig& c) {
  const json& list = j.at("keyslots");
  if (!list.is_array()) throw CorruptData("config field 'keyslots' is not a list");
  if (list.empty())
    throw CorruptData(std::string("the config has no key slot left, so no password opens it (every slot was removed "
                                  "from the file: it was edited or damaged); ") +
                      (c.kind == VaultKind::Directory
                           ? "the master key that init printed still opens the vault ('mount --masterkey')"
                           : "a copy of the container's header from before (its first 64 KiB) still opens the volume"));
  if (list.size() > static_cast<std::size_t>(kMaxKeySlots))
    throw CorruptData("the config has " + std::to_string(list.size()) + " key slots, more than the " +
                      std::to_string(kMaxKeySlots) + " gpucryptfs ever writes: it is damaged or was edited");
  for (const json& e : list) {
    KeySlot s = key_slot_from_json(e);
    if (c.find_slot(s.number)) throw CorruptData("the config has key slot " + std::to_string(s.number) + " twice");
    c.slots.push_back(std::move(s));
  }
  std::sort(c.slots.begin(), c.slots.end(), [](const KeySlot& a, const KeySlot& b) { return a.number < b.number; });
  const auto d = cf::decode_base64(j, "digest", c.digest.size());
  std::copy(d.begin(), d.end(), c.digest.begin());
}

}  // namespace

VaultConfig VaultConfig::from_json(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw CorruptData("the config file is not valid JSON");
  VaultConfig c;
  try {
    if (j.value("format", "") != "gpucryptfs") throw CorruptData("the config file is not a gpucryptfs config");
    const std::int64_t version = cf::integer(j, "version");
    if (version < 1 || version > kMaxFormatVersion)
      throw UserError("the config has format version " + std::to_string(version) + "; this gpucryptfs reads versions 1 to " +
                      std::to_string(kMaxFormatVersion) + " only (a newer gpucryptfs may be needed)");
    c.version = static_cast<int>(version);
    const std::string kind = cf::string(j, "kind");
    if (kind == "volume") c.kind = VaultKind::Volume;
    else if (kind != "directory") throw CorruptData("config field 'kind' is '" + kind + "'");
    if (c.kind == VaultKind::Volume && c.version != 1)
      throw UserError("the config is a format " + std::to_string(c.version) +
                      " volume; volumes are format 1 only (a newer gpucryptfs may be needed)");
    c.cipher = cf::string(j, "cipher");
    if (c.cipher != "AES-256-GCM") throw CorruptData("unsupported cipher '" + c.cipher + "' in config");
    const std::int64_t chunk = cf::integer(j, "chunk_size");
    if (chunk < 0 || !valid_chunk_size(static_cast<std::uint64_t>(chunk))) throw CorruptData("config field 'chunk_size' is " + std::to_string(chunk));
    c.chunk_size = static_cast<std::uint32_t>(chunk);
    if (c.kind == VaultKind::Volume) {
      const std::int64_t vs = cf::integer(j, "volume_size");
      if (vs < 0) throw CorruptData("config field 'volume_size' is negative");
      c.volume_size = static_cast<std::uint64_t>(vs);
    }
    c.features = cf::string_list(j, "features");
    for (const auto& f : c.features)
      if (std::find(kFeatures.begin(), kFeatures.end(), f) == kFeatures.end() && f != kLongNameMaxFeature &&
          f != kDeterministicNamesFeature)
        throw UserError("the config needs feature '" + f + "', which this gpucryptfs does not know");
    const bool has_max = std::find(c.features.begin(), c.features.end(), kLongNameMaxFeature) != c.features.end();
    if (has_max != j.contains("long_name_max"))
      throw CorruptData("the config has the feature 'long_name_max' or the field, not both");
    if (has_max) {
      const std::int64_t m = cf::integer(j, "long_name_max");
      if (m < kMinLongNameMax || m > kMaxLongNameMax || c.kind != VaultKind::Directory)
        throw CorruptData("config field 'long_name_max' is " + std::to_string(m));
      c.long_name_max = static_cast<std::uint32_t>(m);
    }
    const auto has_feature = [&](const char* f) { return std::find(c.features.begin(), c.features.end(), f) != c.features.end(); };
    if (c.has_deterministic_names() && (has_feature(kDirIvFeature) || c.kind != VaultKind::Directory))
      throw CorruptData("the config has the feature 'deterministic_names' with 'dir_iv' or in a volume: one vault's names have one kind of IV");
    // No "config_version": version 1, as every config before key slots. A config names the way
    // its key is kept once, never twice: mixed fields are damage, not a choice to guess at.
    if (!j.contains("config_version")) {
      if (j.contains("keyslots") || j.contains("digest"))
        throw CorruptData("the config has key slots but no 'config_version'");
      c.config_version = kConfigVersionSingleKey;
      read_single_key(j, c);
    } else {
      const std::int64_t cv = cf::integer(j, "config_version");
      if (cv != kConfigVersionKeySlots)
        throw UserError("the config has config version " + std::to_string(cv) + "; this gpucryptfs reads config versions 1 (no 'config_version' field) and 2 only (a newer gpucryptfs may be needed)");
      if (j.contains("kdf") || j.contains("encrypted_key"))
        throw CorruptData("the config has key slots and also a top-level 'kdf' or 'encrypted_key'");
      c.config_version = kConfigVersionKeySlots;
      read_key_slots(j, c);
    }
  } catch (const json::exception& e) {
    throw CorruptData(std::string("the config file is missing a field or has one of the wrong type (") + e.what() + ")");
  }
  return c;
}

}  // namespace gcfs
