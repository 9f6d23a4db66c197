#include "fs/name_mapping.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>

#include "crypto/aes_siv.h"
#include "crypto/base64url.h"
#include "crypto/blob_cipher.h"
#include "fs/content_file.h"

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

}  // namespace

DiskName NameMapping::to_disk(std::string_view plain, const DirIv& iv) const {
  DiskName n;
  n.encoded = names_.encrypt(plain, iv);
  if (n.encoded.size() <= kMaxNameBytes) {
    n.entry = n.encoded;
  } else {
    n.entry = std::string(kLongNamePrefix) + sha256_base64url(n.encoded);
    n.is_long = true;
  }
  return n;
}

std::optional<std::string> NameMapping::to_plain(int dirfd, std::string_view entry, const DirIv& iv) const {
  if (is_long_name_entry(entry)) {
    auto encoded = read_name_file(dirfd, entry);
    // The .name file must hash to its entry: otherwise a swapped .name file could rename entries.
    if (!encoded || std::string(kLongNamePrefix) + sha256_base64url(*encoded) != entry) return std::nullopt;
    // Only names too long for an entry take the long form: a short one here would be a second
    // spelling of a name that already has its own entry (two entries, one plaintext name).
    if (encoded->size() <= kMaxNameBytes) return std::nullopt;
    return names_.decrypt(*encoded, iv);
  }
  if (is_internal_entry(entry)) return std::nullopt;
  return names_.decrypt(entry, iv);
}

int NameMapping::write_name_file(int dirfd, const DiskName& n) {
  if (!n.is_long) return 0;
  const std::string file = n.name_file();
  int fd = ::openat(dirfd, file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0400);
  if (fd < 0) {
    // Its content follows from its name, so an existing one is the right one (or is fixed below).
    if (errno != EEXIST) return -errno;
    auto have = read_name_file(dirfd, n.entry);
    if (have && *have == n.encoded) return 0;
    if (::unlinkat(dirfd, file.c_str(), 0) != 0) return -errno;
    return write_name_file(dirfd, n);
  }
  ssize_t w = pwrite_full(fd, n.encoded.data(), n.encoded.size(), 0);
  ::close(fd);
  if (w < 0) {
    ::unlinkat(dirfd, file.c_str(), 0);
    return static_cast<int>(w);
  }
  return 0;
}

int NameMapping::remove_name_file(int dirfd, const DiskName& n) {
  if (!n.is_long) return 0;
  if (::unlinkat(dirfd, n.name_file().c_str(), 0) != 0 && errno != ENOENT) return -errno;
  return 0;
}

std::optional<std::string> NameMapping::read_name_file(int dirfd, std::string_view long_entry) {
  const std::string file = std::string(long_entry) + std::string(kLongNameSuffix);
  int fd = ::openat(dirfd, file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  std::string buf(4096, '\0');
  ssize_t n = pread_full(fd, buf.data(), buf.size(), 0);
  ::close(fd);
  if (n <= 0 || static_cast<std::size_t>(n) == buf.size()) return std::nullopt;
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

std::string NameMapping::encrypt_symlink(std::string_view target) const {
  return base64url_encode(seal_blob(blob_key_, bytes_of(kSymlinkAad), bytes_of(target)));
}

std::optional<std::string> NameMapping::decrypt_symlink(std::string_view stored) const {
  auto raw = base64url_decode(stored);
  if (!raw) return std::nullopt;
  auto pt = open_blob(blob_key_, bytes_of(kSymlinkAad), *raw);
  if (!pt) return std::nullopt;
  return std::string(pt->begin(), pt->end());
}

std::optional<std::string> NameMapping::encrypt_xattr_name(std::string_view plain) const {
  if (!plain.starts_with("user.") || plain.size() <= 5) return std::nullopt;
  return std::string(kXattrPrefix) + base64url_encode(siv_encrypt(sivkey_.bytes, bytes_of(kXattrNameAad), bytes_of(plain)));
}

std::optional<std::string> NameMapping::decrypt_xattr_name(std::string_view stored) const {
  if (!stored.starts_with(kXattrPrefix)) return std::nullopt;
  auto raw = base64url_decode(stored.substr(kXattrPrefix.size()));
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
