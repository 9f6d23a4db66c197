// fsck of what encrypts names and metadata: long-name files, directory IVs and extended
// attributes.
#include "fs/fsck/checker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gcfs::fsck {

// A long name: its .name file, read beneath the directory (a regular file of at most a few KiB,
// nothing else is opened), must hash to the entry, be too long for an entry of its own, and
// decrypt. nullopt with *why saying which of these fails.
std::optional<std::string> Checker::long_name(int dirfd, const std::string& entry, const DirIv& iv, std::string* why) {
  const std::string file = entry + std::string(kLongNameSuffix);
  OpenResult r = open_beneath(dirfd, file, FileType::Regular, O_RDONLY);
  std::vector<std::uint8_t> raw;
  if (!r) {
    *why = "long name whose " + file + " file " + (r.error == ENOENT ? std::string("is missing") : describe(r));
    return std::nullopt;
  }
  if (read_capped(r.fd.get(), kMaxNameFileBytes, &raw) != 0 || raw.empty()) {
    *why = "long name whose " + file + " file is unreadable, empty or too big for a name";
    return std::nullopt;
  }
  const std::string encoded(raw.begin(), raw.end());
  // The hash check comes first: otherwise a swapped .name file could rename entries.
  const std::size_t limit = vault_.names().long_name_max();  // init --longnamemax, else 255
  if (std::string(kLongNamePrefix) + sha256_base64url(encoded) == entry && encoded.size() > limit)
    if (auto plain = names_.decrypt(encoded, iv)) return plain;
  if (encoded.size() <= limit)
    *why = "long-name entry holding a name short enough for its own entry (a planted second spelling)";
  else if (names_.decrypt(encoded, iv))
    *why = "long name whose .name file does not match its hash (swapped or edited)";
  else
    *why = "long name that does not decrypt (damaged, from another vault, or moved from another directory)";
  return std::nullopt;
}

bool Checker::read_iv(int dirfd, const std::vector<Frame>& frames, DirIv* iv) {
  auto cpath = [&] { return join(dir_crel(), kDirIvFileName); };
  if (vault_.dir_ivs().deterministic()) {
    // No IV files in this vault: one here was not written by it (planted, copied in from another
    // vault, or left by a sync client). Its names are read with the constant IV all the same.
    struct stat st {};
    if (::fstatat(dirfd, kDirIvFileName, &st, AT_SYMLINK_NOFOLLOW) == 0)
      problem(cpath(), dir_plain(frames),
              std::string("a directory IV file in a vault with deterministic names, which writes none (not "
                          "written by gpucryptfs here; names in this directory do not use it)"),
              false);
    return vault_.dir_ivs().read(dirfd, iv, cpath()) == 0;
  }
  OpenResult r = open_beneath(dirfd, kDirIvFileName, FileType::Regular, O_RDONLY);
  if (!r) {
    problem(cpath(), dir_plain(frames),
            std::string("directory IV ") + (r.error == ENOENT ? std::string("missing") : describe(r)) +
                ": no name in this directory can be decrypted",
            false);
    return false;
  }
  std::vector<std::uint8_t> buf;
  const int rc = read_capped(r.fd.get(), kDirIvBytes, &buf);
  if (rc != 0 || buf.size() != kDirIvBytes) {
    struct stat st {};
    const long long size = ::fstat(r.fd.get(), &st) == 0 ? static_cast<long long>(st.st_size) : 0;
    problem(cpath(), dir_plain(frames),
            (rc == 0 || rc == -EFBIG ? "directory IV has " + std::to_string(size) + " bytes instead of 16"
                                     : std::string("directory IV cannot be read: ") + std::strerror(-rc)) +
                ": no name in this directory can be decrypted",
            false);
    return false;
  }
  std::copy(buf.begin(), buf.end(), iv->begin());
  return true;
}

void Checker::check_xattrs(int fd, const Where& where) {
  ssize_t len = ::flistxattr(fd, nullptr, 0);
  if (len <= 0) return;  // none, or a filesystem without xattrs
  std::string list(static_cast<std::size_t>(len), '\0');
  len = ::flistxattr(fd, list.data(), list.size());
  if (len <= 0) return;
  list.resize(static_cast<std::size_t>(len));
  for (std::size_t pos = 0; pos < list.size();) {
    const std::string stored(list.c_str() + pos);
    pos += stored.size() + 1;
    if (!NameMapping::is_stored_xattr_name(stored)) continue;
    ++report_.xattrs;
    auto pname = vault_.names().decrypt_xattr_name(stored);
    if (!pname) {
      problem(where.cipher(), where.plain(), "extended attribute " + stored + ": its name does not decrypt", false);
      continue;
    }
    ssize_t vlen = ::fgetxattr(fd, stored.c_str(), nullptr, 0);
    std::vector<std::uint8_t> value(vlen > 0 ? static_cast<std::size_t>(vlen) : 0);
    if (vlen >= 0) vlen = ::fgetxattr(fd, stored.c_str(), value.data(), value.size());
    if (vlen < 0) {
      problem(where.cipher(), where.plain(), "extended attribute " + *pname + ": cannot read it: " + std::strerror(errno),
              false);
      continue;
    }
    value.resize(static_cast<std::size_t>(vlen));
    if (!vault_.names().decrypt_xattr_value(stored, value))
      problem(where.cipher(), where.plain(),
              "extended attribute " + *pname + ": its value does not decrypt (damaged or moved)", false);
  }
}

}  // namespace gcfs::fsck
