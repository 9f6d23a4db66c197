#include "fs/volume_rekey_record.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "crypto/base64url.h"
#include "crypto/blob_cipher.h"
#include "crypto/errors.h"
#include "crypto/hmac_sha256.h"
#include "crypto/kdf.h"
#include "fs/framed_block.h"
#include "fs/plain_io.h"

namespace gcfs {
namespace {

constexpr int kBlocks = 2;
constexpr std::string_view kWrapInfo = "gpucryptfs v2 volume rekey new master key AES-256-GCM";
constexpr std::string_view kMacInfo = "gpucryptfs v2 volume rekey record HMAC-SHA256";
constexpr std::string_view kWrapAad = "gpucryptfs volume rekey record";

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

SecretBytes derive(const SecretBytes& master, std::string_view info) {
  return hkdf_sha256(master, {}, bytes_of(info), 32);
}

BlobKey wrap_key(const SecretBytes& old_master) {
  const SecretBytes k = derive(old_master, kWrapInfo);
  BlobKey key;
  std::copy(k.begin(), k.end(), key.bytes.begin());
  return key;
}

HmacSha256Digest record_mac(const SecretBytes& new_master, std::string_view text) {
  const SecretBytes k = derive(new_master, kMacInfo);
  return hmac_sha256(k, {bytes_of(text)});
}

// Everything but the MAC, in one canonical text (nlohmann's objects keep their keys sorted).
nlohmann::json fields(const VolumeRekeyRecord& r) {
  return {{"record_version", 1},
          {"config", r.next.to_json(-1)},
          {"segment_chunks", r.segment_chunks},
          {"done_chunks", r.progress.done_chunks},
          {"hot_first", r.progress.hot_first},
          {"hot_count", r.progress.hot_count},
          {"hot_area", r.progress.hot_area},
          {"new_master_key", base64_encode(r.new_key_wrap)}};
}

std::uint64_t block_offset(int b) { return kVolumeRekeyRecordOffset + static_cast<std::uint64_t>(b) * kVolumeRekeyBlockBytes; }

void sync_or_throw(int fd, const std::string& label) {
  if (::fdatasync(fd) != 0) throw UserError("cannot sync " + label + ": " + std::strerror(errno));
}

}  // namespace

VolumeRekeyCopies read_volume_rekey_copies(int fd, const std::string& label) {
  VolumeRekeyCopies c;
  std::vector<std::pair<std::uint64_t, int>> order;
  std::vector<std::string> bodies(kBlocks);
  for (int b = 0; b < kBlocks; ++b) {
    std::vector<std::uint8_t> block(kVolumeRekeyBlockBytes, 0);
    const ssize_t n = pread_full(fd, block.data(), block.size(), block_offset(b));
    if (n < 0) {
      c.damage += (c.damage.empty() ? "" : "; ") + std::string("record block ") + std::to_string(b) +
                  " of " + label + " cannot be read: " + std::strerror(static_cast<int>(-n));
      continue;
    }
    FramedBlock f = decode_framed_block(block, kVolumeRekeyMagic);
    if (f.state == FramedBlock::State::Empty) continue;
    c.any_magic = true;
    if (f.state == FramedBlock::State::Damaged) {
      c.damage += (c.damage.empty() ? "" : "; ") + std::string("record block ") + std::to_string(b) + ": " + f.why;
      continue;
    }
    bodies[b] = std::move(f.body);
    order.emplace_back(f.generation, b);
  }
  std::sort(order.begin(), order.end(), [](auto& x, auto& y) { return x.first > y.first; });
  for (auto& [gen, b] : order) c.bodies.emplace_back(gen, std::move(bodies[b]));
  if (!order.empty()) c.newest_generation = order.front().first, c.newest_block = order.front().second;
  return c;
}

OpenedVolumeRekey open_volume_rekey(const VolumeRekeyCopies& copies, const SecretBytes& unlocked,
                                    const std::string& label) {
  std::string why = copies.bodies.empty() ? "no whole copy" : "";
  for (const auto& [gen, body] : copies.bodies) {
    try {
      nlohmann::json j = nlohmann::json::parse(body);
      const std::string mac_text = j.at("mac").get<std::string>();
      j.erase("mac");
      if (j.at("record_version").get<int>() != 1) throw UserError("a record of a newer version");
      OpenedVolumeRekey out;
      auto wrap = base64_decode(j.at("new_master_key").get<std::string>());
      auto mac = base64_decode(mac_text);
      if (!wrap || !mac || mac->size() != kHmacSha256Bytes) throw CorruptData("a field is not base64");
      // The key that opened the header is the old one (the new key's wrap opens under it) or
      // already the new one (the header was switched, the pass is over).
      if (auto k = open_blob(wrap_key(unlocked), bytes_of(kWrapAad), *wrap)) {
        out.old_master = unlocked;
        out.new_master.assign(k->begin(), k->end());
        secure_wipe(k->data(), k->size());
      } else {
        out.new_master = unlocked;
      }
      const auto want = record_mac(out.new_master, j.dump());
      if (!tags_equal(want.data(), mac->data(), want.size())) throw CorruptData("its MAC does not match this key");
      VolumeRekeyRecord& r = out.record;
      r.next = VaultConfig::from_json(j.at("config").get<std::string>());
      r.segment_chunks = j.at("segment_chunks").get<std::uint64_t>();
      r.progress.done_chunks = j.at("done_chunks").get<std::uint64_t>();
      r.progress.hot_first = j.at("hot_first").get<std::uint64_t>();
      r.progress.hot_count = j.at("hot_count").get<std::uint64_t>();
      r.progress.hot_area = j.at("hot_area").get<int>();
      r.new_key_wrap = std::move(*wrap);
      if (r.segment_chunks == 0 || r.progress.hot_count > r.segment_chunks || r.progress.hot_area < 0 ||
          r.progress.hot_area > 1)
        throw CorruptData("its progress fields are impossible");
      return out;
    } catch (const nlohmann::json::exception& e) {
      why = std::string("copy of generation ") + std::to_string(gen) + ": " + e.what();
    } catch (const UserError& e) {
      why = std::string("copy of generation ") + std::to_string(gen) + ": " + e.what();
    }
  }
  throw CorruptData("the re-key record in " + label + " does not open with this key (" + why +
                    (copies.damage.empty() ? "" : "; " + copies.damage) +
                    "): without it the re-key cannot be finished; the container is left as it is");
}

VolumeRekeyRecord make_volume_rekey(const SecretBytes& old_master, const SecretBytes& new_master, VaultConfig next,
                                    std::uint64_t segment_chunks) {
  VolumeRekeyRecord r;
  r.next = std::move(next);
  r.segment_chunks = segment_chunks;
  r.new_key_wrap = seal_blob(wrap_key(old_master), bytes_of(kWrapAad), new_master);
  return r;
}

void write_volume_rekey(int fd, const std::string& label, const VolumeRekeyRecord& record,
                        const SecretBytes& new_master, VolumeRekeyCopies* copies) {
  nlohmann::json j = fields(record);
  j["mac"] = base64_encode(record_mac(new_master, j.dump()));
  const int target = copies->newest_block == 0 ? 1 : 0;
  const std::uint64_t generation = copies->newest_generation + 1;
  std::vector<std::uint8_t> block;
  try {
    block = encode_framed_block(kVolumeRekeyMagic, generation, j.dump(), kVolumeRekeyBlockBytes);
  } catch (const std::length_error&) {
    throw UserError("the re-key record of " + label + " does not fit its block");
  }
  const ssize_t n = pwrite_full(fd, block.data(), block.size(), block_offset(target));
  if (n < 0) throw UserError("cannot write the re-key record of " + label + ": " + std::strerror(static_cast<int>(-n)));
  sync_or_throw(fd, label);
  copies->newest_block = target;
  copies->newest_generation = generation;
  copies->any_magic = true;
}

void clear_volume_rekey(int fd, const std::string& label) {
  const std::vector<std::uint8_t> zeros(kBlocks * kVolumeRekeyBlockBytes, 0);
  const ssize_t n = pwrite_full(fd, zeros.data(), zeros.size(), kVolumeRekeyRecordOffset);
  if (n < 0) throw UserError("cannot clear the re-key record of " + label + ": " + std::strerror(static_cast<int>(-n)));
  sync_or_throw(fd, label);
}

}  // namespace gcfs
