#include "fs/name_mapping.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "crypto/aes_siv.h"
#include "crypto/base64url.h"
#include "crypto/blob_cipher.h"
#include "fs/plain_io.h"
#include "fs/log.h"
#include "fs/safe_open.h"

namespace gcfs {
namespace {

constexpr std::string_view kSymlinkAad = "gpucryptfs symlink";
constexpr std::string_view kXattrNameAad = "gpucryptfs xattr name";

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

std::string sha256_base64url(std::string_view s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr) != 1) throw std::runtime_error("SHA-256 failed");
  return base64url_encode({md, len});
}

// Where dirfd is, for log messages.
std::string path_of(int dirfd) {
  char buf[4096];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(dirfd)).c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "(directory fd " + std::to_string(dirfd) + ")";
}

// Writes `content` as the sibling file `file` of dirfd (long names and long symlink targets), whose
// content follows from its name: an existing file with that content is kept, anything else there
// is replaced (logged). `read` gives what is there now (nullopt, with *damage, when unusable).
// The new file is fsynced before this returns, that is before the entry that needs it is made: a
// program's fsync of the directory then keeps the entry with its sibling's bytes, whatever the
// backing filesystem committed first (without it, a power cut after that fsync left an empty
// .name file, and the entry dropped out of its listing). Its name is in the same directory as
// the entry's, so the same directory fsync keeps both.
int write_sibling_file(int dirfd, const std::string& file, const std::string& content,
                       const std::function<std::optional<std::string>(std::string*)>& read) {
  // A few rounds: whatever sits there is replaced, but someone replacing it again and again
  // meanwhile gets an error, not an endless loop.
  for (int attempt = 0; attempt < 3; ++attempt) {
    OpenResult r = open_beneath(dirfd, file, FileType::Regular, O_WRONLY | O_CREAT | O_EXCL, 0400);
    if (r) {
      ssize_t w = pwrite_full(r.fd.get(), content.data(), content.size(), 0);
      if (w >= 0 && ::fdatasync(r.fd.get()) != 0) w = -errno;
      r.fd.reset();
      if (w < 0) {
        ::unlinkat(dirfd, file.c_str(), 0);
        return static_cast<int>(w);
      }
      return 0;
    }
    // EEXIST: a regular file is there; EUCLEAN/ELOOP: something else (found_type says what).
    if (r.error != EEXIST && r.error != EUCLEAN && r.error != ELOOP) return -r.error;
    std::string damage;
    auto have = read(&damage);
    if (have && *have == content) return 0;
    if (r.error == EUCLEAN && S_ISDIR(r.found_type)) {
      log::error(path_of(dirfd) + "/" + file + ": is a directory where gpucryptfs keeps its own file (damaged; "
                 "the entry cannot be stored until it is removed)");
      return -EIO;
    }
    // Its content follows from its name, so the right one can always be written instead.
    log::warning(path_of(dirfd) + "/" + file + ": " + (damage.empty() ? std::string("does not match its entry") : damage) +
                 " (damaged file); writing it again");
    if (::unlinkat(dirfd, file.c_str(), 0) != 0 && errno != ENOENT) return -errno;
  }
  log::error(path_of(dirfd) + "/" + file + ": keeps being replaced while it is written; giving up");
  return -EIO;
}

// A sibling file's content: a regular file of 1..cap bytes; nullopt (with *damage saying why,
// unless it is simply missing) otherwise.
std::optional<std::string> read_sibling_file(int dirfd, const std::string& file, std::size_t cap, std::string* damage) {
  OpenResult r = open_beneath(dirfd, file, FileType::Regular, O_RDONLY);
  if (!r) {
    if (damage && r.error != ENOENT) *damage = r.why();
    return std::nullopt;
  }
  std::vector<std::uint8_t> buf;
  int rc = read_capped(r.fd.get(), cap, &buf);
  if (rc != 0 || buf.empty()) {
    if (damage) {
      struct stat st {};
      if (rc == -EFBIG && ::fstat(r.fd.get(), &st) == 0)
        *damage = "holds " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(cap) + " it may";
      else
        *damage = rc == 0 ? std::string("is empty") : std::string("cannot be read: ") + std::strerror(-rc);
    }
    return std::nullopt;
  }
  return std::string(buf.begin(), buf.end());
}

}  // namespace

DiskName NameMapping::to_disk(std::string_view plain, const DirIv& iv, bool remember) const {
  DiskName n;
  if (!remember) {
    n.encoded = names_.encrypt(plain, iv);
  } else if (auto known = cache_->find_encoded(iv, plain)) {
    n.encoded = std::move(*known);
  } else {
    n.encoded = names_.encrypt(plain, iv);
    cache_->put_encoded(iv, plain, n.encoded);
    // And the other way, for the listing that follows what was made here (ls after cp, find after
    // tar): each name it lists that it finds here costs no AES-SIV decryption, which was a fifth
    // of the daemon's time listing a tree with attributes on the H100 machine. Short names only:
    // a long name's plaintext also depends on its .name file (to_plain reads it every time).
    if (n.encoded.size() <= long_name_max_) cache_->put_plain(iv, n.encoded, plain);
  }
  if (n.encoded.size() <= long_name_max_) {
    n.entry = n.encoded;
  } else {
    n.entry = std::string(kLongNamePrefix) + sha256_base64url(n.encoded);
    n.is_long = true;
  }
  return n;
}

std::optional<std::string> NameMapping::to_plain(int dirfd, std::string_view entry, const DirIv& iv,
                                                 std::string* damage) const {
  if (is_long_name_entry(entry)) {
    auto encoded = read_name_file(dirfd, entry, damage);
    // The .name file must hash to its entry: otherwise a swapped .name file could rename entries.
    if (!encoded || std::string(kLongNamePrefix) + sha256_base64url(*encoded) != entry) return std::nullopt;
    // Only names too long for an entry take the long form: a short one here would be a second
    // spelling of a name that already has its own entry (two entries, one plaintext name).
    if (encoded->size() <= long_name_max_) return std::nullopt;
    return names_.decrypt(*encoded, iv);
  }
  // Past the limit a name takes the long form: a short entry that long is a second spelling too.
  if (is_internal_entry(entry) || entry.size() > long_name_max_) return std::nullopt;
  // Short names only: a long name's plaintext also depends on its .name file being there.
  if (auto known = cache_->find_plain(iv, entry)) return known;
  auto plain = names_.decrypt(entry, iv);
  if (plain) {
    cache_->put_plain(iv, entry, *plain);
    cache_->put_encoded(iv, *plain, entry);  // the lookup or unlink that follows
  }
  return plain;
}

int NameMapping::write_name_file(int dirfd, const DiskName& n) {
  if (!n.is_long) return 0;
  return write_sibling_file(dirfd, n.name_file(), n.encoded,
                            [&](std::string* damage) { return read_name_file(dirfd, n.entry, damage); });
}

int NameMapping::remove_name_file(int dirfd, const DiskName& n) {
  if (!n.is_long) return 0;
  if (::unlinkat(dirfd, n.name_file().c_str(), 0) != 0 && errno != ENOENT) return -errno;
  return 0;
}

std::optional<std::string> NameMapping::read_name_file(int dirfd, std::string_view long_entry, std::string* damage) {
  return read_sibling_file(dirfd, std::string(long_entry) + std::string(kLongNameSuffix), kMaxNameFileBytes, damage);
}

std::string NameMapping::encrypt_symlink(std::string_view target) const {
  return base64url_encode(seal_blob(blob_key_, bytes_of(kSymlinkAad), bytes_of(target)));
}

std::string NameMapping::encrypt_symlink(std::string_view target, std::span<const std::uint8_t, 12> nonce) const {
  return base64url_encode(seal_blob_with_nonce(blob_key_, nonce, bytes_of(kSymlinkAad), bytes_of(target)));
}

std::optional<std::string> NameMapping::decrypt_symlink(std::string_view stored) const {
  auto raw = base64url_decode(stored);
  if (!raw) return std::nullopt;
  auto pt = open_blob(blob_key_, bytes_of(kSymlinkAad), *raw);
  if (!pt) return std::nullopt;
  return std::string(pt->begin(), pt->end());
}

StoredLink NameMapping::long_link(std::string encoded) {
  StoredLink l;
  l.link = std::string(kLongTargetPrefix) + sha256_base64url(encoded);
  l.encoded = std::move(encoded);
  l.is_long = true;
  return l;
}

StoredLink NameMapping::store_symlink(std::string_view target, bool long_form) const {
  std::string encoded = encrypt_symlink(target);
  if (long_form) return long_link(std::move(encoded));
  StoredLink l;
  l.link = encoded;
  l.encoded = std::move(encoded);
  return l;
}

std::optional<std::string> NameMapping::read_symlink(int dirfd, std::string_view link, std::string* damage) const {
  if (!link.starts_with(kLongTargetPrefix)) {
    auto t = decrypt_symlink(link);
    if (!t && damage) *damage = "symlink target does not decrypt (damaged or not from this vault)";
    return t;
  }
  std::string why;
  auto encoded = read_sibling_file(dirfd, std::string(link), kMaxLongTargetFileBytes, &why);
  if (!encoded) {
    if (damage) *damage = "long symlink target whose file " + std::string(link) + " " + (why.empty() ? "is missing" : why);
    return std::nullopt;
  }
  // The file must hash to the link: otherwise a swapped file could redirect the symlink.
  if (std::string(kLongTargetPrefix) + sha256_base64url(*encoded) != link) {
    if (damage) *damage = "long symlink target whose file " + std::string(link) + " does not match its hash (swapped or edited)";
    return std::nullopt;
  }
  auto t = decrypt_symlink(*encoded);
  if (!t && damage) *damage = "long symlink target does not decrypt (damaged or not from this vault)";
  return t;
}

std::optional<StoredLink> NameMapping::read_long_link(int dirfd, std::string_view link) {
  if (!link.starts_with(kLongTargetPrefix)) return std::nullopt;
  auto encoded = read_sibling_file(dirfd, std::string(link), kMaxLongTargetFileBytes, nullptr);
  if (!encoded || std::string(kLongTargetPrefix) + sha256_base64url(*encoded) != link) return std::nullopt;
  return long_link(std::move(*encoded));
}

std::optional<std::string> NameMapping::read_link(int fd, const char* entry) {
  // A short link holds the encoded target of at most 4095 bytes; one byte more tells a link that
  // something else wrote (longer) from a full one.
  std::string buf(kMaxSymlinkTargetBytes + 1, '\0');
  ssize_t n = ::readlinkat(fd, entry, buf.data(), buf.size());
  if (n < 0) return std::nullopt;
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

int NameMapping::write_long_target(int dirfd, const StoredLink& l) {
  if (!l.is_long) return 0;
  return write_sibling_file(dirfd, l.link, l.encoded, [&](std::string* damage) {
    return read_sibling_file(dirfd, l.link, kMaxLongTargetFileBytes, damage);
  });
}

void NameMapping::remove_long_target_if_unused(int dirfd, std::string_view link) {
  if (!link.starts_with(kLongTargetPrefix)) return;
  // Hard links of one symlink share its file: scan the directory for another one. Only symlinks
  // with long targets ever get here, so the scan is rare.
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return;
  }
  bool used = false;
  char buf[kMaxNameBytes + 1];
  while (dirent* e = ::readdir(d)) {
    if (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) continue;
    ssize_t n = ::readlinkat(dirfd, e->d_name, buf, sizeof buf);
    if (n >= 0 && std::string_view(buf, static_cast<std::size_t>(n)) == link) {
      used = true;
      break;
    }
  }
  ::closedir(d);
  if (!used) ::unlinkat(dirfd, std::string(link).c_str(), 0);
}

bool NameMapping::storable_xattr_name(std::string_view plain) {
  // security.capability is kept too (a backup of /usr/bin restores it; the mount is nosuid, so
  // it never grants anything here); the kernel removes it on write, truncate and chown itself.
  for (std::string_view ns : {"user.", "trusted.", "security."})
    if (plain.starts_with(ns)) return plain.size() > ns.size();
  return plain == kAclAccessXattr || plain == kAclDefaultXattr;
}

std::optional<std::string> NameMapping::encrypt_xattr_name(std::string_view plain, bool special) const {
  if (!storable_xattr_name(plain)) return std::nullopt;
  return std::string(special ? kSpecialXattrPrefix : kXattrPrefix) +
         base64url_encode(siv_encrypt(sivkey_.bytes, bytes_of(kXattrNameAad), bytes_of(plain)));
}

bool NameMapping::is_stored_xattr_name(std::string_view stored) {
  return stored.starts_with(kXattrPrefix) || stored.starts_with(kSpecialXattrPrefix);
}

std::optional<std::string> NameMapping::decrypt_xattr_name(std::string_view stored) const {
  std::string_view prefix = stored.starts_with(kXattrPrefix) ? kXattrPrefix
                            : stored.starts_with(kSpecialXattrPrefix) ? kSpecialXattrPrefix
                                                                       : std::string_view();
  if (prefix.empty()) return std::nullopt;
  auto raw = base64url_decode(stored.substr(prefix.size()));
  if (!raw) return std::nullopt;
  auto pt = siv_decrypt(sivkey_.bytes, bytes_of(kXattrNameAad), *raw);
  if (!pt) return std::nullopt;
  return std::string(pt->begin(), pt->end());
}

std::vector<std::uint8_t> NameMapping::encrypt_xattr_value(std::string_view stored_name,
                                                           std::span<const std::uint8_t> value) const {
  return seal_blob(blob_key_, bytes_of(stored_name), value);
}

std::optional<std::vector<std::uint8_t>> NameMapping::decrypt_xattr_value(std::string_view stored_name,
                                                                         std::span<const std::uint8_t> sealed) const {
  return open_blob(blob_key_, bytes_of(stored_name), sealed);
}

}  // namespace gcfs
