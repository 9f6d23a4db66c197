// EncryptedFs: extended attributes. Only user.* attributes can be stored (their names and values
// encrypted as docs/FORMAT.md says); other namespaces answer ENOTSUP/ENODATA, which cp -a, tar
// and rsync take as "not supported here".
#include <sys/xattr.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fs/log.h"
#include "mount/encrypted_fs.h"
#include "mount/encrypted_fs_handles.h"

namespace gcfs::mount {
namespace {

constexpr std::size_t kMaxXattrValue = 65536;  // XATTR_SIZE_MAX
constexpr std::size_t kSealOverhead = 28;      // nonce + tag

}  // namespace

void EncryptedFs::setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, std::size_t size,
                           int flags) {
  auto stored = vault_.names().encrypt_xattr_name(name);
  if (!stored) return (void)fuse_reply_err(req, ENOTSUP);
  if (stored->size() > XATTR_NAME_MAX) return (void)fuse_reply_err(req, ERANGE);
  if (size + kSealOverhead > kMaxXattrValue) return (void)fuse_reply_err(req, E2BIG);
  auto sealed = vault_.names().encrypt_xattr_value(
      *stored, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(value), size));
  PathFd pf = path_fd(inode(ino));
  if (!pf.ok()) return (void)fuse_reply_err(req, -pf.error());
  int r = ::setxattr(pf.proc_path().c_str(), stored->c_str(), sealed.data(), sealed.size(), flags);
  fuse_reply_err(req, r == 0 ? 0 : errno);
}

void EncryptedFs::getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, std::size_t size) {
  auto stored = vault_.names().encrypt_xattr_name(name);
  if (!stored || stored->size() > XATTR_NAME_MAX) return (void)fuse_reply_err(req, ENODATA);
  Inode& in = inode(ino);
  PathFd pf = path_fd(in);
  if (!pf.ok()) return (void)fuse_reply_err(req, -pf.error());
  std::vector<std::uint8_t> sealed(kMaxXattrValue);
  ssize_t n = ::getxattr(pf.proc_path().c_str(), stored->c_str(), sealed.data(), sealed.size());
  if (n < 0) return (void)fuse_reply_err(req, errno);
  sealed.resize(static_cast<std::size_t>(n));
  auto plain = vault_.names().decrypt_xattr_value(*stored, sealed);
  if (!plain) {
    log::error(label_of(in) + ": the value of extended attribute " + name + " does not decrypt (tampered)");
    return (void)fuse_reply_err(req, EIO);
  }
  if (size == 0) return (void)fuse_reply_xattr(req, plain->size());
  if (size < plain->size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, reinterpret_cast<const char*>(plain->data()), plain->size());
}

void EncryptedFs::listxattr(fuse_req_t req, fuse_ino_t ino, std::size_t size) {
  PathFd pf = path_fd(inode(ino));
  if (!pf.ok()) return (void)fuse_reply_err(req, -pf.error());
  const std::string proc = pf.proc_path();
  ssize_t n = ::listxattr(proc.c_str(), nullptr, 0);
  if (n < 0) return (void)fuse_reply_err(req, errno);
  std::vector<char> raw(static_cast<std::size_t>(n) + 1);
  n = ::listxattr(proc.c_str(), raw.data(), raw.size());
  if (n < 0) return (void)fuse_reply_err(req, errno);
  std::string out;
  for (std::size_t i = 0; i < static_cast<std::size_t>(n);) {
    std::string stored(raw.data() + i);
    i += stored.size() + 1;
    if (auto plain = vault_.names().decrypt_xattr_name(stored)) {
      out += *plain;
      out += '\0';
    }
  }
  if (size == 0) return (void)fuse_reply_xattr(req, out.size());
  if (size < out.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, out.data(), out.size());
}

void EncryptedFs::removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  auto stored = vault_.names().encrypt_xattr_name(name);
  if (!stored || stored->size() > XATTR_NAME_MAX) return (void)fuse_reply_err(req, ENODATA);
  PathFd pf = path_fd(inode(ino));
  if (!pf.ok()) return (void)fuse_reply_err(req, -pf.error());
  int r = ::removexattr(pf.proc_path().c_str(), stored->c_str());
  fuse_reply_err(req, r == 0 ? 0 : errno);
}

}  // namespace gcfs::mount
