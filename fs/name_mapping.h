// Plaintext names to CIPHERDIR entries and back, as docs/FORMAT.md lays them out: SIV-encrypted
// base64url names under the directory IV, the long-name form for encodings past 255 bytes, and
// the encryption of symlink targets and extended attributes. No FUSE here: the daemon, fsck and
// the tests all use it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/aes_siv.h"
#include "crypto/key_ring.h"
#include "crypto/name_cipher.h"

namespace gcfs {

constexpr std::size_t kMaxNameBytes = 255;  // NAME_MAX, for plaintext and ciphertext names alike
constexpr std::string_view kLongNamePrefix = "gcfs.longname.";
constexpr std::string_view kLongNameSuffix = ".name";
constexpr std::string_view kXattrPrefix = "user.gcfs.";
// The most a long name's .name file can hold: the unpadded base64url of the SIV ciphertext of a
// 255-byte name (the name and its 16-byte tag), 362 bytes. A bigger one is damage, never read.
constexpr std::size_t kMaxNameFileBytes = ((kMaxNameBytes + kSivTagBytes) * 4 + 2) / 3;

// Where one plaintext name lives in its ciphertext directory.
struct DiskName {
  std::string entry;    // the directory entry: the encoded name, or gcfs.longname.<hash>
  std::string encoded;  // the full encoded name (equal to entry unless is_long)
  bool is_long = false;
  // The sibling file holding `encoded` for a long name.
  std::string name_file() const { return entry + std::string(kLongNameSuffix); }
};

// Every name with a dot is gpucryptfs's own (config, dir IV, long-name files): never shown.
inline bool is_internal_entry(std::string_view entry) { return entry.find('.') != std::string_view::npos; }
inline bool is_long_name_entry(std::string_view entry) {
  return entry.starts_with(kLongNamePrefix) && !entry.ends_with(kLongNameSuffix);
}

class NameMapping {
 public:
  explicit NameMapping(const KeyRing& keys) : names_(keys.names_key()), blob_key_(keys.blob_key()), sivkey_(keys.names_key()) {}

  // The entry for plain in a directory with this IV. Plain names must be 1..255 bytes without '/'.
  DiskName to_disk(std::string_view plain, const DirIv& iv) const;
  // The plaintext name of a directory entry, or nullopt for our own files and for entries that do
  // not decrypt (not ours, moved from another directory, or a long name without its .name file).
  // dirfd is needed to read a long name's .name file. *damage (when given) is set to what is wrong
  // with a .name file that is there but is not a regular file of at most kMaxNameFileBytes (a
  // FIFO, a directory, a link, a huge file), for the caller's log; it stays empty otherwise.
  std::optional<std::string> to_plain(int dirfd, std::string_view entry, const DirIv& iv,
                                      std::string* damage = nullptr) const;

  // Long-name sibling files. Return 0 or -errno. Reached through fs/safe_open.h: a .name file is
  // never followed as a link, never opened unless it is a regular file (so a FIFO or device there
  // cannot block), and never read past kMaxNameFileBytes.
  // No-op for short names. An existing file with the right content is kept; one with other
  // content, or of another type, is replaced (its content follows from its name) and logged; a
  // directory there is -EIO (logged).
  static int write_name_file(int dirfd, const DiskName& n);
  static int remove_name_file(int dirfd, const DiskName& n);  // no-op for short names
  // The content of long_entry's .name file; nullopt when it is missing or damaged (then *damage,
  // when given, says what was found, except for a file that is simply missing).
  static std::optional<std::string> read_name_file(int dirfd, std::string_view long_entry,
                                                   std::string* damage = nullptr);

  std::string encrypt_symlink(std::string_view target) const;
  std::optional<std::string> decrypt_symlink(std::string_view stored) const;

  // Extended attributes: user.*, trusted.*, security.* and the two POSIX ACLs can be stored, all
  // of them as encrypted user.* attributes of the backing file (the kernel has checked who may
  // touch which namespace before the request reaches us). encrypt_xattr_name returns nullopt for
  // other names; decrypt_xattr_name returns nullopt for names that are not ours.
  static constexpr std::string_view kAclAccessXattr = "system.posix_acl_access";
  static constexpr std::string_view kAclDefaultXattr = "system.posix_acl_default";
  static bool storable_xattr_name(std::string_view plain);
  std::optional<std::string> encrypt_xattr_name(std::string_view plain) const;
  std::optional<std::string> decrypt_xattr_name(std::string_view stored) const;
  std::vector<std::uint8_t> encrypt_xattr_value(std::string_view stored_name, std::span<const std::uint8_t> value) const;
  std::optional<std::vector<std::uint8_t>> decrypt_xattr_value(std::string_view stored_name,
                                                              std::span<const std::uint8_t> sealed) const;

 private:
  NameCipher names_;
  BlobKey blob_key_;
  NamesKey sivkey_;
};

}  // namespace gcfs
