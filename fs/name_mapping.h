// Plaintext names to CIPHERDIR entries and back, as docs/FORMAT.md lays them out: SIV-encrypted
// base64url names under the directory IV, the long-name form for encodings past 255 bytes, and
// the encryption of symlink targets and extended attributes. No FUSE here: the daemon, fsck and
// the tests all use it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/aes_siv.h"
#include "crypto/key_ring.h"
#include "crypto/name_cipher.h"
#include "fs/name_cache.h"

namespace gcfs {

constexpr std::size_t kMaxNameBytes = 255;  // NAME_MAX, for plaintext and ciphertext names alike
constexpr std::string_view kLongNamePrefix = "gcfs.longname.";
constexpr std::string_view kLongNameSuffix = ".name";
constexpr std::string_view kXattrPrefix = "user.gcfs.";
// The same names for symlinks, FIFOs, sockets and devices, which take no user.* attribute.
constexpr std::string_view kSpecialXattrPrefix = "trusted.gcfs.";
// The most a long name's .name file can hold: the unpadded base64url of the SIV ciphertext of a
// 255-byte name (the name and its 16-byte tag), 362 bytes. A bigger one is damage, never read.
constexpr std::size_t kMaxNameFileBytes = ((kMaxNameBytes + kSivTagBytes) * 4 + 2) / 3;

// Symlink targets: up to PATH_MAX - 1 bytes, as ext4 stores. Their encoded form (base64url of
// nonce, ciphertext and tag) is a third longer, so one that the backing filesystem refuses as a
// link target (ENAMETOOLONG) is stored in a sibling file gcfs.longtarget.<hash> instead, and the
// link on disk holds that file's name (docs/FORMAT.md, "Long symlink targets").
constexpr std::size_t kMaxSymlinkTargetBytes = 4095;
constexpr std::string_view kLongTargetPrefix = "gcfs.longtarget.";
// The encoded form of the longest target: 12-byte nonce, 4095 bytes, 16-byte tag, base64url.
constexpr std::size_t kMaxLongTargetFileBytes = ((kMaxSymlinkTargetBytes + 28) * 4 + 2) / 3;
inline bool is_long_target_file(std::string_view entry) { return entry.starts_with(kLongTargetPrefix); }

// What a symlink stores: the link target on disk, and for a long target the sibling file.
struct StoredLink {
  std::string link;     // what symlinkat writes: the encoded target, or gcfs.longtarget.<hash>
  std::string encoded;  // the encoded target (equal to link unless is_long)
  bool is_long = false;
};

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
  // long_name_max: the longest backing entry (init --longnamemax; 255 by default): an encoded
  // name longer than that takes the long form.
  explicit NameMapping(const KeyRing& keys, std::size_t long_name_max = kMaxNameBytes)
      : names_(keys.names_key()), blob_key_(keys.blob_key()), sivkey_(keys.names_key()),
        cache_(std::make_shared<NameCache>()), long_name_max_(long_name_max) {}
  std::size_t long_name_max() const { return long_name_max_; }

  // The entry for plain in a directory with this IV. Plain names must be 1..255 bytes without '/'.
  // remember=false leaves the name cache alone (the guesses of fs/conflict_names.h, which would
  // otherwise push out names that are in use).
  DiskName to_disk(std::string_view plain, const DirIv& iv, bool remember = true) const;
  // The plaintext of one encoded short name, nothing cached and no file read; nullopt when it does
  // not decrypt (fs/conflict_names.h tries the prefixes of a sync client's renamed entries).
  std::optional<std::string> decrypt_short(std::string_view encoded, const DirIv& iv) const {
    return names_.decrypt(encoded, iv);
  }
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

  // The names this mapping remembers both ways (tests).
  NameCache& cache() const { return *cache_; }

  std::string encrypt_symlink(std::string_view target) const;
  // With a derived nonce (reverse mode), never used for two different targets.
  std::string encrypt_symlink(std::string_view target, std::span<const std::uint8_t, 12> nonce) const;
  std::optional<std::string> decrypt_symlink(std::string_view stored) const;
  // The stored form of a symlink target, short (the encoded target itself) or long.
  StoredLink store_symlink(std::string_view target, bool long_form) const;
  // The long form of an encoded target (also for one sealed elsewhere, e.g. reverse mode).
  static StoredLink long_link(std::string encoded);
  // The plaintext target of a symlink in dirfd whose link on disk is `link`: a short target is
  // decrypted as it is; a long one is read from its sibling file (through fs/safe_open.h, capped
  // at kMaxLongTargetFileBytes), which must hash to the link, then decrypted. nullopt when it
  // does not decrypt, with *damage (when given) saying what is wrong.
  std::optional<std::string> read_symlink(int dirfd, std::string_view link, std::string* damage = nullptr) const;
  // The sibling file of a long target (no-op for a short one): written before the link is made,
  // kept when already there with the right content. 0 or -errno.
  static int write_long_target(int dirfd, const StoredLink& l);
  // Removes the long-target file `link` names from dirfd unless a symlink in dirfd still holds
  // that link (a hard link of it). No-op for a short target. Called after a symlink left dirfd.
  static void remove_long_target_if_unused(int dirfd, std::string_view link);
  // The long target file `link` names in dirfd, checked against its hash but not decrypted (to
  // copy it beside a new hard link or a renamed symlink); nullopt when missing or damaged.
  static std::optional<StoredLink> read_long_link(int dirfd, std::string_view link);
  // The link on disk of the symlink `entry` in dirfd (entry "" for an O_PATH descriptor of the
  // symlink itself); nullopt when it cannot be read.
  static std::optional<std::string> read_link(int fd, const char* entry);

  // Extended attributes: user.*, trusted.*, security.* and the two POSIX ACLs can be stored, as
  // encrypted user.gcfs.* attributes of the backing file, or, on a symlink, FIFO, socket or device
  // (where Linux allows no user.* attribute, docs/FORMAT.md), as trusted.gcfs.* ones, which the
  // daemon needs CAP_SYS_ADMIN for (the kernel has checked who may touch which namespace before
  // the request reaches us). encrypt_xattr_name returns nullopt for other names;
  // decrypt_xattr_name returns nullopt for names that are not ours, under either prefix.
  static constexpr std::string_view kAclAccessXattr = "system.posix_acl_access";
  static constexpr std::string_view kAclDefaultXattr = "system.posix_acl_default";
  static bool storable_xattr_name(std::string_view plain);
  // special: the attribute is for a file that is neither regular nor a directory.
  std::optional<std::string> encrypt_xattr_name(std::string_view plain, bool special = false) const;
  // Whether a backing attribute's name is one of ours (either prefix).
  static bool is_stored_xattr_name(std::string_view stored);
  std::optional<std::string> decrypt_xattr_name(std::string_view stored) const;
  std::vector<std::uint8_t> encrypt_xattr_value(std::string_view stored_name, std::span<const std::uint8_t> value) const;
  std::optional<std::vector<std::uint8_t>> decrypt_xattr_value(std::string_view stored_name,
                                                              std::span<const std::uint8_t> sealed) const;

 private:
  NameCipher names_;
  BlobKey blob_key_;
  NamesKey sivkey_;
  // Names encrypted and decrypted before (fs/name_cache.h); shared by copies, which hold the
  // same key.
  std::shared_ptr<NameCache> cache_;
  std::size_t long_name_max_;
};

}  // namespace gcfs
