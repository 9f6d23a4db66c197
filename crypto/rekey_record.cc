#include "crypto/rekey_record.h"

#include <algorithm>
#include <cstring>

#include "crypto/aes_gcm.h"
#include "crypto/errors.h"
#include "crypto/kdf.h"
#include "crypto/random.h"

namespace gcfs {
namespace {

constexpr std::string_view kRecordKeyInfo = "gpucryptfs rekey record AES-256-GCM";
// magic, id, the config's length (u32 LE): what precedes the config.
constexpr std::size_t kHeadBytes = 8 + 16 + 4;
constexpr std::size_t kTailBytes = 12 + 32 + 16;

SecretBytes record_key(const SecretBytes& old_master) {
  return hkdf_sha256(old_master, {},
                     {reinterpret_cast<const std::uint8_t*>(kRecordKeyInfo.data()), kRecordKeyInfo.size()}, kGcmKeyBytes);
}

// Everything the tag covers besides the wrapped key: the head and the config.
std::vector<std::uint8_t> associated_data(const RekeyRecord& r) {
  std::vector<std::uint8_t> out(kRekeyRecordMagic.begin(), kRekeyRecordMagic.end());
  out.insert(out.end(), r.id.begin(), r.id.end());
  const auto n = static_cast<std::uint32_t>(r.new_config_json.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), r.new_config_json.begin(), r.new_config_json.end());
  return out;
}

}  // namespace

RekeyRecord RekeyRecord::make(const SecretBytes& old_master, const SecretBytes& new_master, std::string new_config_json) {
  if (new_master.size() != 32) throw std::logic_error("rekey record: a master key is 32 bytes");
  if (new_config_json.size() + kHeadBytes + kTailBytes > kMaxRekeyRecordBytes)
    throw UserError("the new config is too large for a re-key record");
  RekeyRecord r;
  random_bytes(r.id);
  random_bytes(r.nonce);
  r.new_config_json = std::move(new_config_json);
  const SecretBytes key = record_key(old_master);
  r.tag = gcm_seal(key, r.nonce, associated_data(r), new_master, r.wrapped_new_master.data());
  return r;
}

std::vector<std::uint8_t> RekeyRecord::to_bytes() const {
  std::vector<std::uint8_t> out = associated_data(*this);
  out.insert(out.end(), nonce.begin(), nonce.end());
  out.insert(out.end(), wrapped_new_master.begin(), wrapped_new_master.end());
  out.insert(out.end(), tag.begin(), tag.end());
  return out;
}

RekeyRecord RekeyRecord::from_bytes(std::span<const std::uint8_t> b) {
  if (b.size() < kHeadBytes + kTailBytes)
    throw CorruptData("the re-key record is " + std::to_string(b.size()) + " bytes, shorter than any record (torn or truncated)");
  if (b.size() > kMaxRekeyRecordBytes) throw CorruptData("the re-key record is larger than any record");
  if (!std::equal(kRekeyRecordMagic.begin(), kRekeyRecordMagic.end(), b.begin()))
    throw CorruptData("the re-key record does not start with a re-key record's magic (damaged, or of a newer gpucryptfs)");
  RekeyRecord r;
  std::copy_n(b.begin() + 8, 16, r.id.begin());
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(b[24 + i]) << (8 * i);
  if (b.size() != kHeadBytes + n + kTailBytes)
    throw CorruptData("the re-key record is " + std::to_string(b.size()) + " bytes where its lengths say " +
                      std::to_string(kHeadBytes + std::size_t{n} + kTailBytes) + " (torn or truncated)");
  r.new_config_json.assign(reinterpret_cast<const char*>(b.data() + kHeadBytes), n);
  const std::uint8_t* t = b.data() + kHeadBytes + n;
  std::copy_n(t, 12, r.nonce.begin());
  std::copy_n(t + 12, 32, r.wrapped_new_master.begin());
  std::copy_n(t + 44, 16, r.tag.begin());
  return r;
}

std::optional<SecretBytes> RekeyRecord::open(const SecretBytes& old_master) const {
  const SecretBytes key = record_key(old_master);
  SecretBytes out(wrapped_new_master.size());
  if (!gcm_open(key, nonce, associated_data(*this), wrapped_new_master, tag, out.data())) return std::nullopt;
  return out;
}

std::string RekeyRecord::id_text() const {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 8; ++i) s += hex[id[i] >> 4], s += hex[id[i] & 15];
  return s;
}

}  // namespace gcfs
