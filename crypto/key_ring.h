// Every key a vault uses, derived from its one random master key with HKDF-SHA256 and a distinct
// label per purpose, so that no key ever serves two purposes.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "crypto/chunk_engine.h"
#include "crypto/kdf.h"
#include "crypto/secret.h"

namespace gcfs {

constexpr std::size_t kMasterKeyBytes = 32;
constexpr std::size_t kFileIdBytes = 16;
using FileId = std::array<std::uint8_t, kFileIdBytes>;
using NamesKey = SecretKey<64>;  // AES-256-SIV takes two AES-256 keys
using BlobKey = SecretKey<32>;   // AES-256-GCM for symlink targets and xattr values
using JournalKey = SecretKey<32>;  // HMAC-SHA256 over crash-journal records (fs/journal_record.h)
using ReverseKey = SecretKey<32>;  // HMAC-SHA256 deriving reverse mode's IDs and nonces (fs/reverse_derivation.h)

class KeyRing {
 public:
  explicit KeyRing(std::span<const std::uint8_t> master_key);

  // The content key of one file: HKDF(master, salt = file ID). A fresh file ID per file means no
  // two files share a key, so the per-key GCM message limits apply per file, not per vault.
  ChunkKey content_key(const FileId& file_id) const;
  const NamesKey& names_key() const { return names_; }
  const BlobKey& blob_key() const { return blob_; }
  // Authenticates the crash journal's records, so that a record planted in CIPHERDIR by someone
  // without the master key is never acted on. Derived, never stored: the vault format is unchanged.
  const JournalKey& journal_key() const { return journal_; }
  // Reverse mode derives its file IDs, directory IVs and nonces with it instead of drawing them at
  // random, so one plaintext gives one ciphertext. Derived, never stored, unused by a forward mount.
  const ReverseKey& reverse_key() const { return reverse_; }

 private:
  SecretKey<kMasterKeyBytes> master_;
  // content_key's derivation, set up once (a file's key is derived at every open).
  std::unique_ptr<SaltedHkdf> content_kdf_;
  NamesKey names_;
  BlobKey blob_;
  JournalKey journal_;
  ReverseKey reverse_;
};

}  // namespace gcfs
