#include "fs/journal_record.h"

#include <openssl/evp.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>

#include "crypto/hmac_sha256.h"
#include "fs/chunk_layout.h"

namespace gcfs {
namespace {

void put16(std::uint8_t* p, std::uint16_t v) { p[0] = static_cast<std::uint8_t>(v >> 8), p[1] = static_cast<std::uint8_t>(v); }
void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
void put64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
}
std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
std::uint32_t get32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | p[i];
  return v;
}
std::uint64_t get64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

constexpr std::uint64_t kMaxFileOffset = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

// The bounds every record must keep, whichever version: nothing computed from its fields can
// wrap, point past what an off_t holds, or describe more payload than its chunks (and its slot)
// have room for.
bool in_bounds(const JournalRecordHeader& h, std::uint32_t chunk_size) {
  if (h.chunk_size != chunk_size || chunk_size == 0 || h.path.size() > kJournalMaxPathBytes) return false;
  if (h.chunk_count == 0 || h.chunk_count > journal_chunks_per_record(chunk_size)) return false;
  const std::uint64_t D = std::uint64_t{chunk_size} + kChunkOverhead;
  // Every chunk but the last is whole; the last holds at least its nonce, its tag and one byte.
  if (h.payload_len > journal_slot_payload_bytes(chunk_size) || h.payload_len > std::uint64_t{h.chunk_count} * D ||
      h.payload_len <= std::uint64_t{h.chunk_count - 1} * D + kChunkOverhead)
    return false;
  // The end of the run on disk, base + header + (first + count) * D, must fit an off_t.
  if (h.base_offset > kMaxFileOffset - kFileHeaderBytes) return false;
  const std::uint64_t max_chunks = (kMaxFileOffset - kFileHeaderBytes - h.base_offset) / D;
  if (h.chunk_count > max_chunks || h.first_chunk > max_chunks - h.chunk_count) return false;
  return h.old_cipher_size <= kMaxFileOffset && h.new_cipher_size <= kMaxFileOffset &&
         h.sequence < kJournalMaxSequence;
}

// Feeds what a record's digest covers to `update`: the header's first 88 bytes, the path hint,
// then the nonce and tag of each payload chunk. Not the chunks' ciphertext: hashing 64 KiB per
// chunk doubled the cost of a small rewrite, and recovery writes back only pre-images that pass
// AES-GCM authentication, which covers the ciphertext. The nonces and tags still tell a payload
// the kill cut short, or one an older record left in the slot, from the one written.
template <typename Update>
bool feed(const std::uint8_t* block, const JournalRecordHeader& h, const std::uint8_t* payload, Update update) {
  if (!update(block, kJournalDigestOffset) ||
      !update(block + kJournalRecordHeaderBytes, h.path.size()))
    return false;
  const std::uint64_t D = std::uint64_t{h.chunk_size} + kChunkOverhead;
  for (std::uint64_t start = 0; start < h.payload_len; start += D) {
    const std::uint64_t end = std::min<std::uint64_t>(start + D, h.payload_len);
    if (end - start < kChunkOverhead) return false;  // in_bounds never lets such a record through
    if (!update(payload + start, kChunkNonceOnDisk) || !update(payload + end - kChunkTagOnDisk, kChunkTagOnDisk))
      return false;
  }
  return true;
}

using Digest = std::array<std::uint8_t, kJournalDigestBytes>;

Digest sha256_digest(const std::uint8_t* block, const JournalRecordHeader& h, const std::uint8_t* payload) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  Digest d{};
  unsigned len = 0;
  const bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1 &&
                  feed(block, h, payload,
                       [&](const std::uint8_t* p, std::size_t n) { return EVP_DigestUpdate(ctx.get(), p, n) == 1; }) &&
                  EVP_DigestFinal_ex(ctx.get(), d.data(), &len) == 1 && len == d.size();
  if (!ok) throw std::runtime_error("SHA-256 failed");
  return d;
}

// HMAC-SHA256 rather than GMAC: it needs no nonce. A GMAC key would have to take a fresh nonce for
// every record the journal ever writes (one per protected write, for the vault's lifetime), and a
// repeated one gives away the authentication key; HMAC has no such budget to track.
// mac is keyed and at the start of a message; the digest goes to out (kJournalDigestBytes).
void hmac_digest_into(HmacSha256& mac, const std::uint8_t* block, const JournalRecordHeader& h,
                      const std::uint8_t* payload, std::uint8_t* out) {
  if (!feed(block, h, payload, [&](const std::uint8_t* p, std::size_t n) { return mac.update(p, n), true; }))
    throw std::runtime_error("HMAC-SHA256 failed");
  mac.finish(out);
}

Digest hmac_digest(const std::uint8_t* block, const JournalRecordHeader& h, const std::uint8_t* payload,
                   const JournalKey& key) {
  HmacSha256 mac({key.data(), key.size()});
  Digest d{};
  hmac_digest_into(mac, block, h, payload, d.data());
  return d;
}

void encode_fields(const JournalRecordHeader& h, std::uint16_t version, std::uint8_t* block) {
  if (!in_bounds(h, h.chunk_size)) throw std::invalid_argument("journal record out of bounds");
  std::fill(block, block + kJournalHeaderBlock, std::uint8_t{0});
  std::copy(kJournalMagic.begin(), kJournalMagic.end(), block);
  put16(block + 8, version);
  put32(block + 12, static_cast<std::uint32_t>(h.path.size()));
  put64(block + 16, h.sequence);
  std::copy(h.file_id.begin(), h.file_id.end(), block + 24);
  put64(block + 40, h.first_chunk);
  put32(block + 48, h.chunk_count);
  put32(block + 52, h.chunk_size);
  put64(block + 56, h.base_offset);
  put64(block + 64, h.old_cipher_size);
  put64(block + 72, h.new_cipher_size);
  put64(block + 80, h.payload_len);
  std::copy(h.path.begin(), h.path.end(), block + kJournalRecordHeaderBytes);
}

}  // namespace

std::uint64_t journal_slot_payload_bytes(std::uint32_t chunk_size) {
  const std::uint64_t d = std::uint64_t{chunk_size} + kChunkOverhead;
  const std::uint64_t room = std::max<std::uint64_t>(kJournalRunBytes, d);
  return (room + 4095) / 4096 * 4096;
}

std::uint32_t journal_chunks_per_record(std::uint32_t chunk_size) {
  return static_cast<std::uint32_t>(journal_slot_payload_bytes(chunk_size) / (std::uint64_t{chunk_size} + kChunkOverhead));
}

std::optional<JournalRecordHeader> parse_journal_header(const std::uint8_t* b, std::uint32_t chunk_size) {
  if (!std::equal(kJournalMagic.begin(), kJournalMagic.end(), b)) return std::nullopt;
  JournalRecordHeader h;
  h.version = get16(b + 8);
  if ((h.version != kJournalRecordVersion && h.version != kJournalLegacyRecordVersion) || get16(b + 10) != 0)
    return std::nullopt;
  const std::uint32_t path_len = get32(b + 12);
  if (path_len > kJournalMaxPathBytes) return std::nullopt;
  h.sequence = get64(b + 16);
  std::copy(b + 24, b + 40, h.file_id.begin());
  h.first_chunk = get64(b + 40);
  h.chunk_count = get32(b + 48);
  h.chunk_size = get32(b + 52);
  h.base_offset = get64(b + 56);
  h.old_cipher_size = get64(b + 64);
  h.new_cipher_size = get64(b + 72);
  h.payload_len = get64(b + 80);
  h.path.assign(reinterpret_cast<const char*>(b + kJournalRecordHeaderBytes), path_len);
  if (!in_bounds(h, chunk_size)) return std::nullopt;
  return h;
}

bool journal_digest_ok(const std::uint8_t* block, const JournalRecordHeader& h, const std::uint8_t* payload,
                       const JournalKey& key) {
  const Digest d = h.legacy() ? sha256_digest(block, h, payload) : hmac_digest(block, h, payload, key);
  return tags_equal(d.data(), block + kJournalDigestOffset, d.size());
}

void encode_journal_header(const JournalRecordHeader& h, const std::uint8_t* payload, const JournalKey& key,
                           std::uint8_t* block) {
  encode_fields(h, kJournalRecordVersion, block);
  const Digest d = hmac_digest(block, h, payload, key);
  std::copy(d.begin(), d.end(), block + kJournalDigestOffset);
}

struct JournalMac::Ctx {
  HmacSha256 mac;
};

JournalMac::JournalMac(const JournalKey& key, unsigned lanes) {
  ctxs_.push_back(new Ctx{HmacSha256({key.data(), key.size()})});
  try {
    for (unsigned i = 1; i < lanes; ++i) ctxs_.push_back(new Ctx{ctxs_.front()->mac.clone()});
  } catch (...) {
    for (Ctx* made : ctxs_) delete made;
    throw;
  }
}

JournalMac::~JournalMac() {
  for (Ctx* c : ctxs_) delete c;  // each HmacSha256 cleanses its key's pads
  ctxs_.clear();
}

void JournalMac::digest(unsigned lane, const std::uint8_t* block, const JournalRecordHeader& h,
                        const std::uint8_t* payload, std::uint8_t* out) const {
  if (lane >= ctxs_.size()) throw std::invalid_argument("journal MAC: no such lane");
  HmacSha256& mac = ctxs_[lane]->mac;
  mac.restart();
  hmac_digest_into(mac, block, h, payload, out);
}

void encode_journal_header(const JournalRecordHeader& h, const std::uint8_t* payload, const JournalMac& mac,
                           unsigned lane, std::uint8_t* block) {
  encode_fields(h, kJournalRecordVersion, block);
  mac.digest(lane, block, h, payload, block + kJournalDigestOffset);
}

void encode_legacy_journal_header(const JournalRecordHeader& h, const std::uint8_t* payload, std::uint8_t* block) {
  encode_fields(h, kJournalLegacyRecordVersion, block);
  const Digest d = sha256_digest(block, h, payload);
  std::copy(d.begin(), d.end(), block + kJournalDigestOffset);
}

}  // namespace gcfs
