#include "crypto/vault_config.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>

#include "crypto/aes_gcm.h"
#include "crypto/base64url.h"
#include "crypto/errors.h"
#include "crypto/key_ring.h"
#include "crypto/random.h"

namespace gcfs {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kFeatures = {"dir_iv", "long_names", "hkdf_file_keys", "siv_names", "holes"};

std::span<const std::uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

json public_fields(const VaultConfig& c) {
  json j;
  j["format"] = "gpucryptfs";
  j["version"] = c.version;
  j["kind"] = c.kind == VaultKind::Volume ? "volume" : "directory";
  j["cipher"] = c.cipher;
  j["chunk_size"] = c.chunk_size;
  if (c.kind == VaultKind::Volume) j["volume_size"] = c.volume_size;
  j["kdf"] = {{"name", "scrypt"}, {"log_n", c.scrypt.log_n}, {"r", c.scrypt.r}, {"p", c.scrypt.p},
              {"salt", base64_encode(c.salt)}};
  j["features"] = c.features;
  return j;
}

SecretBytes wrapping_key(const VaultConfig& c, std::string_view password) {
  return scrypt(password, c.salt, c.scrypt, kGcmKeyBytes);
}

std::vector<std::uint8_t> decode_field(const json& j, const char* name, std::size_t want_len = 0) {
  if (!j.contains(name) || !j[name].is_string())
    throw CorruptData(std::string("config field '") + name + "' is missing or not a string");
  auto v = base64_decode(j[name].get<std::string>());
  if (!v || (want_len && v->size() != want_len))
    throw CorruptData(std::string("config field '") + name + "' is not valid base64 of the right length");
  return *v;
}

// Numbers must be JSON integers: get<int>() on 1e300 would convert a double out of range, which
// is undefined behaviour (the config fuzzer found it).
std::int64_t integer_field(const json& j, const char* name) {
  const json& v = j.at(name);
  if (!v.is_number_integer()) throw CorruptData(std::string("config field '") + name + "' is not an integer");
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    throw CorruptData(std::string("config field '") + name + "' is out of range");
  return v.get<std::int64_t>();
}

// Typed reads that name the field: nlohmann's own type errors ("type must be string, but is
// number") do not say which field of the file is wrong.
const json& object_field(const json& j, const char* name) {
  const json& v = j.at(name);
  if (!v.is_object()) throw CorruptData(std::string("config field '") + name + "' is not an object");
  return v;
}

std::string string_field(const json& j, const char* name) {
  const json& v = j.at(name);
  if (!v.is_string()) throw CorruptData(std::string("config field '") + name + "' is not a string");
  return v.get<std::string>();
}

std::vector<std::string> string_list_field(const json& j, const char* name) {
  const json& v = j.at(name);
  if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); }))
    throw CorruptData(std::string("config field '") + name + "' is not a list of strings");
  return v.get<std::vector<std::string>>();
}

// "384 MiB", "256 GiB": memory sizes for the cost messages.
std::string memory_text(std::uint64_t bytes) {
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
  if (bytes % kGiB == 0 || bytes >= 10 * kGiB) return std::to_string((bytes + kGiB - 1) / kGiB) + " GiB";
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB";
}

}  // namespace

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

std::string VaultConfig::authenticated_fields() const { return public_fields(*this).dump(); }

VaultConfig VaultConfig::create(std::string_view password, std::uint32_t chunk_size, const ScryptParams& params,
                                VaultKind kind, SecretBytes* master_out, int format) {
  if (!valid_chunk_size(chunk_size))
    throw UserError("chunk size must be a power of two from 4096 to 1048576 bytes, got " + std::to_string(chunk_size));
  if (format < 1 || format > kMaxFormatVersion || (kind == VaultKind::Volume && format != 1))
    throw UserError("format " + std::to_string(format) + " is not one this gpucryptfs creates" +
                    (kind == VaultKind::Volume ? " for a volume (volumes are format 1)" : ""));
  VaultConfig c = defaults(chunk_size, kind, format);
  c.scrypt = params;
  SecretBytes master(kMasterKeyBytes);
  random_bytes(master);
  c.rewrap(master, password);
  if (master_out) *master_out = std::move(master);
  return c;
}

VaultConfig VaultConfig::defaults(std::uint32_t chunk_size, VaultKind kind, int format) {
  VaultConfig c;
  c.version = format;
  c.kind = kind;
  c.chunk_size = chunk_size;
  c.features = kFeatures;
  return c;
}

void VaultConfig::rewrap(const SecretBytes& master, std::string_view new_password) {
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
  const std::string why = kdf_cost_beyond_init(scrypt, machine_memory_bytes());
  if (!why.empty())
    throw ExpensiveKdf("the config asks for " + why +
                       "; refused before running it, since anyone who can write the config can set it "
                       "(pass --allow-expensive-kdf if you made it so)");
}

SecretBytes VaultConfig::unlock(std::string_view password, KdfPolicy policy) const {
  check_kdf_cost(policy);
  SecretBytes kek = wrapping_key(*this, password);
  const std::string aad = authenticated_fields();
  SecretBytes master(wrapped_key.size());
  if (!gcm_open(kek, key_nonce, as_bytes(aad), wrapped_key, key_tag, master.data()))
    throw WrongPassword("wrong password (or the stored configuration's fields were edited: its authentication failed)");
  return master;
}

std::string VaultConfig::to_json() const {
  json j = public_fields(*this);
  j["encrypted_key"] = {{"nonce", base64_encode(key_nonce)},
                        {"ciphertext", base64_encode(wrapped_key)},
                        {"tag", base64_encode(key_tag)}};
  return j.dump(2) + "\n";
}

VaultConfig VaultConfig::from_json(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw CorruptData("the config file is not valid JSON");
  VaultConfig c;
  try {
    if (j.value("format", "") != "gpucryptfs") throw CorruptData("the config file is not a gpucryptfs config");
    const std::int64_t version = integer_field(j, "version");
    if (version < 1 || version > kMaxFormatVersion)
      throw UserError("the config has format version " + std::to_string(version) + "; this gpucryptfs reads versions 1 to " +
                      std::to_string(kMaxFormatVersion) + " only (a newer gpucryptfs may be needed)");
    c.version = static_cast<int>(version);
    const std::string kind = string_field(j, "kind");
    if (kind == "volume") c.kind = VaultKind::Volume;
    else if (kind != "directory") throw CorruptData("config field 'kind' is '" + kind + "'");
    if (c.kind == VaultKind::Volume && c.version != 1)
      throw UserError("the config is a format " + std::to_string(c.version) +
                      " volume; volumes are format 1 only (a newer gpucryptfs may be needed)");
    c.cipher = string_field(j, "cipher");
    if (c.cipher != "AES-256-GCM") throw CorruptData("unsupported cipher '" + c.cipher + "' in config");
    const std::int64_t chunk = integer_field(j, "chunk_size");
    if (chunk < 0 || !valid_chunk_size(static_cast<std::uint64_t>(chunk))) throw CorruptData("config field 'chunk_size' is " + std::to_string(chunk));
    c.chunk_size = static_cast<std::uint32_t>(chunk);
    if (c.kind == VaultKind::Volume) {
      const std::int64_t vs = integer_field(j, "volume_size");
      if (vs < 0) throw CorruptData("config field 'volume_size' is negative");
      c.volume_size = static_cast<std::uint64_t>(vs);
    }
    const json& kdf = object_field(j, "kdf");
    if (string_field(kdf, "name") != "scrypt") throw CorruptData("config names an unknown KDF");
    const std::int64_t log_n = integer_field(kdf, "log_n"), r = integer_field(kdf, "r"), p = integer_field(kdf, "p");
    if (log_n < kMinScryptLogN || log_n > kMaxScryptLogN || r < 1 || r > 64 || p < 1 || p > 16)
      throw CorruptData("config has out-of-range scrypt parameters");
    c.scrypt.log_n = static_cast<int>(log_n);
    c.scrypt.r = static_cast<int>(r);
    c.scrypt.p = static_cast<int>(p);
    c.salt = decode_field(kdf, "salt");
    if (c.salt.size() < 16) throw CorruptData("config field 'salt' is too short");
    c.features = string_list_field(j, "features");
    for (const auto& f : c.features)
      if (std::find(kFeatures.begin(), kFeatures.end(), f) == kFeatures.end())
        throw UserError("the config needs feature '" + f + "', which this gpucryptfs does not know");
    const json& ek = object_field(j, "encrypted_key");
    auto nonce = decode_field(ek, "nonce", 12);
    std::copy(nonce.begin(), nonce.end(), c.key_nonce.begin());
    c.wrapped_key = decode_field(ek, "ciphertext", kMasterKeyBytes);
    auto tag = decode_field(ek, "tag", 16);
    std::copy(tag.begin(), tag.end(), c.key_tag.begin());
  } catch (const json::exception& e) {
    throw CorruptData(std::string("the config file is missing a field or has one of the wrong type (") + e.what() + ")");
  }
  return c;
}

}  // namespace gcfs
