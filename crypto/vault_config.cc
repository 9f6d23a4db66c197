#include "crypto/vault_config.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

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

}  // namespace

bool valid_chunk_size(std::uint64_t n) {
  return n >= kMinChunkSize && n <= kMaxChunkSize && (n & (n - 1)) == 0;
}

std::string VaultConfig::authenticated_fields() const { return public_fields(*this).dump(); }

VaultConfig VaultConfig::create(std::string_view password, std::uint32_t chunk_size, const ScryptParams& params,
                                VaultKind kind, SecretBytes* master_out) {
  if (!valid_chunk_size(chunk_size))
    throw UserError("chunk size must be a power of two from 4096 to 1048576 bytes, got " + std::to_string(chunk_size));
  VaultConfig c;
  c.kind = kind;
  c.chunk_size = chunk_size;
  c.scrypt = params;
  c.features = kFeatures;
  SecretBytes master(kMasterKeyBytes);
  random_bytes(master);
  c.rewrap(master, password);
  if (master_out) *master_out = std::move(master);
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

SecretBytes VaultConfig::unlock(std::string_view password) const {
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
    if (version != kFormatVersion)
      throw UserError("the config has format version " + std::to_string(version) + "; this gpucryptfs reads version " +
                      std::to_string(kFormatVersion) + " only (a newer gpucryptfs may be needed)");
    const std::string kind = string_field(j, "kind");
    if (kind == "volume") c.kind = VaultKind::Volume;
    else if (kind != "directory") throw CorruptData("config field 'kind' is '" + kind + "'");
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
    if (log_n < 10 || log_n > 28 || r < 1 || r > 64 || p < 1 || p > 16)
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

VaultConfig VaultConfig::load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read the config " + path + ": " + std::strerror(errno) + " (is this a gpucryptfs vault? create one with 'gpucryptfs init')");
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return from_json(ss.str());
  } catch (const CorruptData& e) {
    throw CorruptData(path + ": " + e.what());
  }
}

void VaultConfig::save_file(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  const std::string text = to_json();
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
  if (fd < 0) throw UserError("cannot write " + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw UserError("cannot write " + tmp + ": " + std::strerror(e));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw UserError("cannot write " + tmp + ": " + std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw UserError("cannot replace " + path + ": " + std::strerror(e));
  }
  // The rename reaches the disk with the directory, not with the file: without this, a crash
  // soon after init or passwd can bring back the old config (or none at all).
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);  // best effort: some filesystems refuse fsync on directories
    ::close(dfd);
  }
}

}  // namespace gcfs
