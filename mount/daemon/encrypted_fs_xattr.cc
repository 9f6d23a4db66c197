// EncryptedFs: extended attributes and POSIX ACLs. user.*, trusted.*, security.* and the two ACL
// attributes are stored as encrypted user.gcfs.* attributes of the backing file (trusted.gcfs.*
// for a symlink, FIFO, socket or device, docs/FORMAT.md);
// other names answer ENOTSUP/ENODATA, which cp -a, tar and rsync take as "not supported here".
// The kernel checks who may read or write which namespace, and enforces ACLs, before a request
// reaches us (default_permissions with the POSIX ACL capability); what it leaves to the daemon is
// done here: the mode an access ACL implies, chmod rewriting the ACL, inheritance of default
// ACLs by new entries, and hiding trusted.* names from callers without CAP_SYS_ADMIN.
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fs/log.h"
#include "fs/posix_acl.h"
#include "mount/daemon/caller_creds.h"
#include "mount/daemon/encrypted_fs.h"
#include "mount/daemon/encrypted_fs_handles.h"

namespace gcfs::mount {
namespace {

constexpr std::size_t kMaxXattrValue = 65536;  // XATTR_SIZE_MAX
constexpr std::size_t kSmallXattrValue = 512;
constexpr std::size_t kSealOverhead = 28;      // nonce + tag

bool is_access_acl(std::string_view name) { return name == NameMapping::kAclAccessXattr; }
bool is_acl(std::string_view name) { return is_access_acl(name) || name == NameMapping::kAclDefaultXattr; }

constexpr std::string_view kFileCaps = "security.capability";

// Symlinks, FIFOs, sockets and devices take no user.* attribute on Linux: theirs are stored under
// trusted.gcfs.* (fs/name_mapping.h).
bool special(mode_t type) { return !S_ISREG(type) && !S_ISDIR(type); }

std::span<const std::uint8_t> bytes(const char* p, std::size_t n) {
  return {reinterpret_cast<const std::uint8_t*>(p), n};
}

}  // namespace

std::optional<std::string> EncryptedFs::stored_xattr_name(std::string_view name, bool special_file) {
  if (special_file) return vault_.names().encrypt_xattr_name(name, true);
  // The kernel asks for the ACLs on permission checks and the daemon on every create: their
  // stored names are computed once (the name encryption is deterministic).
  static constexpr std::string_view kHot[] = {NameMapping::kAclAccessXattr, NameMapping::kAclDefaultXattr, kFileCaps};
  std::call_once(hot_names_once_, [&] {
    for (std::string_view n : kHot) hot_names_.emplace_back(n, *vault_.names().encrypt_xattr_name(n));
  });
  for (const auto& [plain, stored] : hot_names_)
    if (plain == name) return stored;
  return vault_.names().encrypt_xattr_name(name);
}

int EncryptedFs::read_xattr(const std::string& path, std::string_view name, std::vector<std::uint8_t>* plain,
                            Inode& in) {
  auto stored = stored_xattr_name(name, special(in.type));
  if (!stored || stored->size() > XATTR_NAME_MAX) return -ENODATA;
  // Most values (ACLs among them) are small: a small buffer first, the largest possible one only
  // when the value does not fit (a 64 KiB buffer for every chmod's ACL check was a cost of its own).
  std::vector<std::uint8_t> sealed(kSmallXattrValue);
  ssize_t n = ::getxattr(path.c_str(), stored->c_str(), sealed.data(), sealed.size());
  if (n < 0 && errno == ERANGE) {
    sealed.resize(kMaxXattrValue);
    n = ::getxattr(path.c_str(), stored->c_str(), sealed.data(), sealed.size());
  }
  if (n < 0) return errno == ENOTSUP ? -ENODATA : -errno;
  sealed.resize(static_cast<std::size_t>(n));
  auto opened = vault_.names().decrypt_xattr_value(*stored, sealed);
  if (!opened) {
    log::error(label_of(in) + ": the value of extended attribute " + std::string(name) + " does not decrypt (tampered)");
    return -EIO;
  }
  *plain = std::move(*opened);
  return 0;
}

int EncryptedFs::write_xattr(const std::string& path, std::string_view name, std::span<const std::uint8_t> value,
                             int flags, bool special_file) {
  auto stored = stored_xattr_name(name, special_file);
  if (!stored) return -ENOTSUP;
  if (stored->size() > XATTR_NAME_MAX) return -ERANGE;
  if (value.size() + kSealOverhead > kMaxXattrValue) return -E2BIG;
  auto sealed = vault_.names().encrypt_xattr_value(*stored, value);
  return ::setxattr(path.c_str(), stored->c_str(), sealed.data(), sealed.size(), flags) == 0 ? 0 : -errno;
}

int EncryptedFs::remove_xattr(const std::string& path, std::string_view name, bool special_file) {
  auto stored = stored_xattr_name(name, special_file);
  if (!stored || stored->size() > XATTR_NAME_MAX) return -ENODATA;
  return ::removexattr(path.c_str(), stored->c_str()) == 0 ? 0 : -errno;
}

int EncryptedFs::set_access_acl(fuse_req_t req, const std::string& path, std::span<const std::uint8_t> value,
                                int flags) {
  auto acl = PosixAcl::parse(value);
  if (!acl) return -EINVAL;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -errno;
  // The mode follows the ACL (posix_acl_update_mode); S_ISGID stays only for a caller in the
  // file's group or holding CAP_FSETID.
  mode_t mode = (st.st_mode & (S_ISUID | S_ISGID | S_ISVTX)) | acl->permission_bits();
  if ((mode & S_ISGID) && !caller_creds(req).in_group_or_capable(st.st_gid)) mode &= ~S_ISGID;
  if (mode != (st.st_mode & 07777) && ::chmod(path.c_str(), mode) != 0) return -errno;
  if (acl->equivalent_to_mode()) {  // the mode says it all: no ACL is kept
    const int rc = remove_xattr(path, NameMapping::kAclAccessXattr);
    return rc == -ENODATA ? 0 : rc;
  }
  return write_xattr(path, NameMapping::kAclAccessXattr, value, flags);
}

int EncryptedFs::chmod_acl(const std::string& path, mode_t mode, Inode& in) {
  if (!acls_) return 0;
  std::vector<std::uint8_t> value;
  int rc = read_xattr(path, NameMapping::kAclAccessXattr, &value, in);
  if (rc == -ENODATA) return 0;
  if (rc < 0) return rc;
  auto acl = PosixAcl::parse(value);
  if (!acl) {
    log::error(label_of(in) + ": its stored access ACL is not a valid ACL");
    return -EIO;
  }
  acl->apply_chmod(mode);
  return write_xattr(path, NameMapping::kAclAccessXattr, acl->serialize(), 0);
}

mode_t EncryptedFs::new_entry_mode(fuse_req_t req, Inode& dir, mode_t mode, bool is_dir, NewEntryAcls* acls) {
  if (!acls_) return mode;  // the kernel has applied the umask
  std::vector<std::uint8_t> value;
  bool known = false;
  {
    std::lock_guard lk(dir.mu);
    if (dir.default_acl) {
      value = *dir.default_acl;
      known = true;
    }
  }
  if (!known) {
    PathFd pf = path_fd(dir);
    const int rc = pf.ok() ? read_xattr(pf.proc_path(), NameMapping::kAclDefaultXattr, &value, dir) : -ENODATA;
    if (rc < 0) value.clear();
    if (rc == 0 || rc == -ENODATA) {
      std::lock_guard lk(dir.mu);
      dir.default_acl = std::make_unique<std::vector<std::uint8_t>>(value);
    }
  }
  auto inherited = value.empty() ? std::nullopt : PosixAcl::parse(value);
  if (!inherited) return mode & ~(fuse_req_ctx(req)->umask & 0777);  // no default ACL: the umask applies
  const PosixAcl access = inherited->inherit_for_new_entry(&mode);
  if (!access.equivalent_to_mode()) acls->access = access.serialize();
  if (is_dir) acls->inherited_default = std::move(value);
  return mode;
}

void EncryptedFs::store_new_entry_acls(const std::string& path, const NewEntryAcls& acls) {
  int rc = 0;
  if (!acls.access.empty()) rc = write_xattr(path, NameMapping::kAclAccessXattr, acls.access, 0);
  if (rc == 0 && !acls.inherited_default.empty())
    rc = write_xattr(path, NameMapping::kAclDefaultXattr, acls.inherited_default, 0);
  if (rc < 0) log::warning(std::string("cannot store the ACL a new entry inherits: ") + std::strerror(-rc));
}

void EncryptedFs::forget_default_acl(Inode& in, std::string_view name) {
  if (name != NameMapping::kAclDefaultXattr) return;
  std::lock_guard lk(in.mu);
  in.default_acl.reset();  // read again on the next create
}

void EncryptedFs::setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, std::size_t size,
                           int flags) {
  // ACLs are stored only where the kernel enforces them.
  if (is_acl(name) && !acls_) return (void)fuse_reply_err(req, ENOTSUP);
  Inode& in = inode(ino);
  PathFd pf = path_fd(in);
  if (!pf.ok()) return (void)fuse_reply_err(req, -pf.error());
  forget_default_acl(in, name);
  int rc;
  if (is_access_acl(name)) {
    rc = set_access_acl(req, pf.proc_path(), bytes(value, size), flags);
  } else {
    if (name == NameMapping::kAclDefaultXattr && !PosixAcl::parse(bytes(value, size))) return (void)fuse_reply_err(req, EINVAL);
    rc = write_xattr(pf.proc_path(), name, bytes(value, size), flags, special(in.type));
  }
  if (rc == 0 && name == kFileCaps) in.file_caps = Inode::kCapsPresent;
  fuse_reply_err(req, -rc);
}

void EncryptedFs::getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, std::size_t size) {
  // A name that is never stored has no value, wherever the file is: answered without a
  // descriptor of it.
  if (!NameMapping::storable_xattr_name(name)) return (void)fuse_reply_err(req, ENODATA);
  Inode& in = inode(ino);
  // The kernel asks for security.capability before the first write to each file: a file known
  // to have none (made by this mount, or asked before) is answered without a backing call.
  const bool caps = name == kFileCaps;
  if (caps && in.file_caps == Inode::kCapsNone) return (void)fuse_reply_err(req, ENODATA);
  PathFd pf = path_fd(in);
  if (!pf.ok()) return (void)fuse_reply_err(req, -pf.error());
  std::vector<std::uint8_t> plain;
  const int rc = read_xattr(pf.proc_path(), name, &plain, in);
  if (caps && S_ISREG(in.type) && (rc == 0 || rc == -ENODATA))
    in.file_caps = rc == 0 ? Inode::kCapsPresent : Inode::kCapsNone;
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  if (size == 0) return (void)fuse_reply_xattr(req, plain.size());
  if (size < plain.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, reinterpret_cast<const char*>(plain.data()), plain.size());
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
  std::optional<bool> sees_trusted;  // trusted.* names are listed only to CAP_SYS_ADMIN, as on ext4
  for (std::size_t i = 0; i < static_cast<std::size_t>(n);) {
    std::string stored(raw.data() + i);
    i += stored.size() + 1;
    if (auto plain = vault_.names().decrypt_xattr_name(stored)) {
      if (plain->starts_with("trusted.")) {
        if (!sees_trusted) sees_trusted = caller_creds(req).cap_sys_admin;
        if (!*sees_trusted) continue;
      }
      out += *plain;
      out += '\0';
    }
  }
  if (size == 0) return (void)fuse_reply_xattr(req, out.size());
  if (size < out.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, out.data(), out.size());
}

void EncryptedFs::removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  Inode& in = inode(ino);
  PathFd pf = path_fd(in);
  if (!pf.ok()) return (void)fuse_reply_err(req, -pf.error());
  forget_default_acl(in, name);
  const int rc = remove_xattr(pf.proc_path(), name, special(in.type));
  if (name == kFileCaps && (rc == 0 || rc == -ENODATA)) in.file_caps = Inode::kCapsNone;
  fuse_reply_err(req, -rc);
}

void EncryptedFs::drop_file_caps_for_write(Inode& in, int fd) {
  const std::uint8_t state = in.file_caps.load(std::memory_order_relaxed);
  if (state == Inode::kCapsNone) return;
  const auto stored = stored_xattr_name(kFileCaps);
  if (!stored) return;
  if (state == Inode::kCapsUnknown && ::fgetxattr(fd, stored->c_str(), nullptr, 0) < 0) {
    if (errno == ENODATA || errno == ENOTSUP) in.file_caps = Inode::kCapsNone;
    return;
  }
  if (::fremovexattr(fd, stored->c_str()) == 0 || errno == ENODATA) {
    in.file_caps = Inode::kCapsNone;
  } else {
    log::warning(label_of(in) + ": cannot remove its file capabilities on a write: " + std::strerror(errno));
  }
}

}  // namespace gcfs::mount
