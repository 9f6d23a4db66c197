// One record of the crash journal (chunk_journal.h) as it lies in its slot: the header block
// (fixed fields, then the path hint) and the digest that makes the record valid
// (docs/FORMAT.md, "Crash journal").
//
// CIPHERDIR may be writable by others, so a record is a claim to be checked, never an order:
//   - version 3 (written now) carries an HMAC-SHA256 under the vault's journal key, which only a
//     holder of the master key can compute;
//   - version 2 (the previous release) carries a plain SHA-256 that anyone can compute; it is
//     still read so that a journal left by that release recovers, but recovery trusts nothing in
//     it beyond what the restored chunk itself proves (journal_recovery.h);
//   - every field is bounded before anything is computed from it: chunk numbers and sizes so that
//     no offset can wrap or leave what an off_t holds, the payload within its slot and within
//     chunk_count whole chunks, the path within the header block.
// Parsing is separate from file I/O so that it can be fuzzed alone (tests/fuzz/fuzz_journal.cc).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "crypto/key_ring.h"

namespace gcfs {

constexpr std::array<std::uint8_t, 8> kJournalMagic = {'G', 'C', 'F', 'S', 'J', 'R', 'N', 'L'};
// 3: HMAC-SHA256 under the journal key. 2: plain SHA-256 (read, never written). 1: ignored.
constexpr std::uint16_t kJournalRecordVersion = 3;
constexpr std::uint16_t kJournalLegacyRecordVersion = 2;
// Every slot starts with one page holding the record header and the path hint; the payload (the
// pre-images) follows at this offset in the slot.
constexpr std::uint64_t kJournalHeaderBlock = 4096;
constexpr std::uint64_t kJournalRecordHeaderBytes = 120;  // before the path hint
constexpr std::uint64_t kJournalMaxPathBytes = kJournalHeaderBlock - kJournalRecordHeaderBytes;
constexpr std::size_t kJournalDigestOffset = 88;  // the header's fields before it are covered
constexpr std::size_t kJournalDigestBytes = 32;
// The payload room of a slot: 1 MiB (the largest FUSE write), or one chunk where chunks are larger.
constexpr std::uint64_t kJournalRunBytes = 1u << 20;
// Sequence numbers count records; no journal writes 2^62 of them. A larger one in a slot was not
// written by gpucryptfs and is ignored, so that it cannot wrap the counter of the next mount.
constexpr std::uint64_t kJournalMaxSequence = std::uint64_t{1} << 62;

// The payload room of one slot and how many chunks a record may describe, for chunk size C.
std::uint64_t journal_slot_payload_bytes(std::uint32_t chunk_size);
std::uint32_t journal_chunks_per_record(std::uint32_t chunk_size);

// The fields of a record's header block, as parsed (and bounded) or as to be written.
struct JournalRecordHeader {
  std::uint16_t version = kJournalRecordVersion;
  std::uint64_t sequence = 0;
  FileId file_id{};
  std::uint64_t first_chunk = 0;
  std::uint32_t chunk_count = 0;
  std::uint32_t chunk_size = 0;        // the vault's plaintext chunk size C
  std::uint64_t base_offset = 0;       // where the content stream starts in the file (0 in a directory vault)
  std::uint64_t old_cipher_size = 0;   // the file's ciphertext size before the write
  std::uint64_t new_cipher_size = 0;   // and after it (before any truncation that followed)
  std::uint64_t payload_len = 0;       // the pre-images' bytes: chunk_count chunks, the last maybe short
  std::string path;                    // hint: the file's ciphertext path relative to CIPHERDIR; may be empty

  // Version 2: its digest is a SHA-256 that anyone could have computed.
  bool legacy() const { return version == kJournalLegacyRecordVersion; }
};

// Parses and bounds the header block (kJournalHeaderBlock bytes) of a slot, for a vault of chunk
// size chunk_size. nullopt when it is not a record of a version this code reads (an invalidated
// slot, a torn one, version 1), is for another chunk size, or has a field out of bounds. The
// digest is NOT checked here: see journal_digest_ok.
std::optional<JournalRecordHeader> parse_journal_header(const std::uint8_t* block, std::uint32_t chunk_size);

// True when the digest in block (bytes 88..119) is right for the header's first 88 bytes, the
// path hint and the nonce and tag of each chunk in payload (h.payload_len bytes): HMAC-SHA256
// under key for version 3, SHA-256 for version 2. h must come from parse_journal_header(block).
// Compared in constant time.
bool journal_digest_ok(const std::uint8_t* block, const JournalRecordHeader& h, const std::uint8_t* payload,
                       const JournalKey& key);

// Fills block (kJournalHeaderBlock bytes, zeroed first) with a version 3 record for h (whose
// version is ignored), its HMAC computed over payload (h.payload_len bytes). h must be in bounds;
// throws std::invalid_argument otherwise, since the reader would then ignore the record.
void encode_journal_header(const JournalRecordHeader& h, const std::uint8_t* payload, const JournalKey& key,
                           std::uint8_t* block);

// HMAC-SHA256 under one journal key, keyed once. Keying an OpenSSL MAC context (its digest looked
// up by name, the key hashed into the pads) cost more than the digest of a record itself: 11% of
// the daemon's time on a random 4 KiB rewrite, which journals one record. It holds one keyed
// context per lane, re-initialised with the same key for each record; a lane is used by one
// thread at a time (the journal uses a slot's number: a slot has one writer), so no lock is taken.
class JournalMac {
 public:
  JournalMac(const JournalKey& key, unsigned lanes);
  ~JournalMac();
  JournalMac(const JournalMac&) = delete;
  JournalMac& operator=(const JournalMac&) = delete;

  unsigned lanes() const { return static_cast<unsigned>(ctxs_.size()); }
  // The digest of a version 3 record (see journal_digest_ok) into out (kJournalDigestBytes),
  // computed in lane (below lanes()), which no other thread is using meanwhile.
  void digest(unsigned lane, const std::uint8_t* block, const JournalRecordHeader& h, const std::uint8_t* payload,
              std::uint8_t* out) const;

 private:
  struct Ctx;  // a keyed crypto::HmacSha256
  std::vector<Ctx*> ctxs_;
};

// The same as encode_journal_header with a journal's keyed MAC, in one of its lanes (what the
// journal writes with).
void encode_journal_header(const JournalRecordHeader& h, const std::uint8_t* payload, const JournalMac& mac,
                           unsigned lane, std::uint8_t* block);

// For tests and the fuzz target: the same block with the previous release's SHA-256 digest
// (version 2), exactly as that release wrote it.
void encode_legacy_journal_header(const JournalRecordHeader& h, const std::uint8_t* payload, std::uint8_t* block);

}  // namespace gcfs
