// EncryptedFs: creating, removing, renaming and linking directory entries. A long name's .name
// file is written before its entry appears and removed after its entry is gone, so an entry
// never exists without it.
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>

#include "fs/dir_iv.h"
#include "fs/log.h"
#include "mount/daemon/encrypted_fs.h"
#include "mount/daemon/encrypted_fs_handles.h"

namespace gcfs::mount {
namespace {

bool entry_exists(int dirfd, const std::string& entry) {
  struct stat st {};
  return ::fstatat(dirfd, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// A directory that holds nothing but its IV file (and perhaps the IV's temporary file, left by a
// crash in mkdir) counts as empty. 0, -ENOTEMPTY or -errno. dirfd: the directory just opened for
// reading (O_RDONLY | O_DIRECTORY), read from its start with getdents64 itself (no second
// descriptor, no DIR stream); *temp_seen (optional) tells whether the temporary file is there.
int check_only_iv(int dirfd, bool* temp_seen = nullptr) {
  if (temp_seen) *temp_seen = false;
  alignas(8) char buf[4096];
  for (;;) {
    const ssize_t n = ::getdents64(dirfd, buf, sizeof buf);
    if (n < 0) return -errno;
    if (n == 0) return 0;
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(buf + off);
      off += e->d_reclen;
      const char* name = e->d_name;
      if (!std::strcmp(name, ".") || !std::strcmp(name, "..") || !std::strcmp(name, kDirIvFileName)) continue;
      if (!std::strcmp(name, kDirIvTempName)) {
        if (temp_seen) *temp_seen = true;
        continue;
      }
      return -ENOTEMPTY;
    }
  }
}

}  // namespace

void EncryptedFs::add_entry(fuse_req_t req, Inode& dir, const char* name, bool new_node,
                            const std::function<int(int dirfd, const char* entry)>& make) {
  PathFd at = path_fd(dir);
  if (!at.ok()) return (void)fuse_reply_err(req, -at.error());
  const int dirfd = at.get();
  DiskName dn;
  int rc = disk_name(dir, name, &dn);
  if (rc == 0) rc = NameMapping::write_name_file(dirfd, dn);
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  if (const int err = make(dirfd, dn.entry.c_str()); err != 0) {
    // EEXIST: the name file belongs to the entry that is already there.
    if (err != EEXIST) NameMapping::remove_name_file(dirfd, dn);
    return (void)fuse_reply_err(req, err);
  }
  if (new_node) give_to_caller(req, dirfd, dn.entry);
  fuse_entry_param e{};
  rc = make_entry(dir, dirfd, dn.entry, &e);
  reply_entry_or_err(req, rc, e);
}

void EncryptedFs::mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  NewEntryAcls acls;
  mode = new_entry_mode(req, inode(parent), mode, false, &acls);
  if (S_ISREG(mode)) {
    // A regular file (mknod(2) of one comes here, not to create): made with O_EXCL and given to
    // its maker through that descriptor, so a file swapped in under the name meanwhile (someone
    // who can reach CIPHERDIR) is never given away.
    add_entry(req, inode(parent), name, false, [&](int dirfd, const char* entry) {
      int fd = ::openat(dirfd, entry, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, mode & 07777);
      if (fd < 0) return errno;
      give_to_caller(req, dirfd, entry, fd);
      store_new_entry_acls("/proc/self/fd/" + std::to_string(fd), acls);
      ::close(fd);
      return 0;
    });
    return;
  }
  add_entry(req, inode(parent), name, true,
            [&](int dirfd, const char* entry) { return ::mknodat(dirfd, entry, mode, rdev) == 0 ? 0 : errno; });
}

void EncryptedFs::mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  Inode& dir = inode(parent);
  PathFd at = path_fd(dir);
  if (!at.ok()) return (void)fuse_reply_err(req, -at.error());
  const int dirfd = at.get();
  DiskName dn;
  int rc = disk_name(dir, name, &dn);
  if (rc == 0) rc = NameMapping::write_name_file(dirfd, dn);
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  NewEntryAcls acls;
  mode = new_entry_mode(req, dir, mode, true, &acls);
  // Owner rwx while we write the IV file, whatever mode the caller asked for.
  if (::mkdirat(dirfd, dn.entry.c_str(), mode | S_IRWXU) != 0) {
    int err = errno;
    if (err != EEXIST) NameMapping::remove_name_file(dirfd, dn);
    return (void)fuse_reply_err(req, err);
  }
  int sub = openat_or_warn(dirfd, dn.entry.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DirIv iv{};
  rc = sub < 0 ? -errno : vault_.dir_ivs().create(sub, &iv);
  if (rc == 0 && (mode & S_IRWXU) != S_IRWXU) {
    // The setgid bit a setgid parent passed on stays: the kernel's mode never carries it.
    struct stat made {};
    const mode_t inherited = ::fstat(sub, &made) == 0 ? made.st_mode & S_ISGID : 0;
    if (::fchmod(sub, (mode & 07777) | inherited) != 0) rc = -errno;
  }
  // Given away through our own descriptor: whatever the name leads to by now is not.
  if (rc == 0) {
    give_to_caller(req, dirfd, dn.entry, sub);
    store_new_entry_acls("/proc/self/fd/" + std::to_string(sub), acls);
  }
  // The IV's name, the mode, owner and ACLs are on the disk before the reply: a caller that
  // fsyncs the parent then has a usable directory after a power cut, not one without its IV.
  if (rc == 0) rc = sync_directory(sub);
  if (sub >= 0) ::close(sub);
  if (rc < 0) {
    if (rc == -EMFILE || rc == -ENFILE) warn_out_of_descriptors();
    log::error(label_of(dir) + "/" + dn.entry + ": cannot write or sync the new directory's IV: " + std::strerror(-rc));
    if (sub >= 0) {
      int s2 = ::openat(dirfd, dn.entry.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (s2 >= 0) {
        ::unlinkat(s2, kDirIvFileName, 0);
        ::close(s2);
      }
    }
    ::unlinkat(dirfd, dn.entry.c_str(), AT_REMOVEDIR);
    NameMapping::remove_name_file(dirfd, dn);
    return (void)fuse_reply_err(req, -rc);
  }
  fuse_entry_param e{};
  rc = make_entry(dir, dirfd, dn.entry, &e);
  if (rc == 0) {
    Inode& created = inode(e.ino);
    std::lock_guard lk(created.mu);
    created.dir_iv = iv;
  }
  reply_entry_or_err(req, rc, e);
}

void EncryptedFs::unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Inode& dir = inode(parent);
  PathFd at = path_fd(dir);
  if (!at.ok()) return (void)fuse_reply_err(req, -at.error());
  const int dirfd = at.get();
  DiskName dn;
  int rc = disk_name(dir, name, &dn);
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  // Which inode loses this name: it must forget it, and, with its last name gone, must no longer
  // be found by its number, which the backing filesystem may give to a new file. Looked at
  // through a descriptor, which the inode keeps when this removes its last name (NameChange):
  // one open and one fstat where a stat, an open and a second look at what was opened would do
  // the same. O_PATH never opens a FIFO or device, and never follows a link.
  int held = ::openat(dirfd, dn.entry.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (held < 0 && (errno == EMFILE || errno == ENFILE) && inodes_.drop_cached_fds() > 0)
    held = ::openat(dirfd, dn.entry.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (held < 0) {
    // Out of descriptors (the inodes of files removed just now keep theirs until the kernel
    // forgets them): the name still goes, only the inode keeps no way to its file.
    if (errno != EMFILE && errno != ENFILE) return (void)fuse_reply_err(req, errno);
    if (::fstatat(dirfd, dn.entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return (void)fuse_reply_err(req, errno);
  } else if (::fstat(held, &st) != 0) {
    const int err = errno;
    ::close(held);
    return (void)fuse_reply_err(req, err);
  }
  if (S_ISDIR(st.st_mode)) {  // what unlink(2) says of a directory (made so behind our back)
    if (held >= 0) ::close(held);
    return (void)fuse_reply_err(req, EISDIR);
  }
  // A symlink's long target file goes with its last name in this directory.
  std::optional<std::string> link;
  if (S_ISLNK(st.st_mode)) link = held >= 0 ? NameMapping::read_link(held, "") : NameMapping::read_link(dirfd, dn.entry.c_str());
  NameChange change = inodes_.begin_change(st, nullptr);
  change.hold_a_opened(held);
  if (::unlinkat(dirfd, dn.entry.c_str(), 0) != 0) return (void)fuse_reply_err(req, errno);
  change.removed(dir, dn.entry);
  NameMapping::remove_name_file(dirfd, dn);
  if (link) NameMapping::remove_long_target_if_unused(dirfd, *link);
  fuse_reply_err(req, 0);
}

void EncryptedFs::rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Inode& dir = inode(parent);
  PathFd at = path_fd(dir);
  if (!at.ok()) return (void)fuse_reply_err(req, -at.error());
  const int dirfd = at.get();
  DiskName dn;
  int rc = disk_name(dir, name, &dn);
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  int sub = ::openat(dirfd, dn.entry.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) return (void)fuse_reply_err(req, errno);
  // The removed directory's inode must forget its name, and no longer be found by its number,
  // which the backing filesystem may give to a new directory.
  struct stat sub_st {};
  if (::fstat(sub, &sub_st) != 0) {
    const int err = errno;
    ::close(sub);
    return (void)fuse_reply_err(req, err);
  }
  NameChange change = inodes_.begin_change(sub_st, nullptr);
  bool temp_seen = false;
  rc = check_only_iv(sub, &temp_seen);
  DirIv iv{};
  bool have_iv = false;
  if (rc == 0) {
    // The IV goes back if the rmdir fails after all: the one the inode keeps (read from this same
    // directory, which is still where sub_st says) or, for a directory not looked at yet, read now.
    bool kept = false;
    if (Inode* gone = change.a(); gone && S_ISDIR(gone->type)) {
      std::lock_guard lk(gone->mu);
      if (gone->dir_iv) {
        iv = *gone->dir_iv;
        kept = true;
      }
    }
    have_iv = kept || vault_.dir_ivs().read(sub, &iv, label_of(dir) + "/" + dn.entry) == 0;
    if (::unlinkat(sub, kDirIvFileName, 0) != 0 && errno != ENOENT) rc = -errno;
    // A directory where the IV belongs (logged by read_dir_iv, unless the IV was kept): damage,
    // not "is a directory".
    if (rc == -EISDIR) {
      if (kept)
        log::error(label_of(dir) + "/" + dn.entry + "/" + kDirIvFileName +
                   ": is a directory where the directory IV belongs (damaged)");
      rc = -EIO;
    }
    if (rc == 0 && temp_seen && ::unlinkat(sub, kDirIvTempName, 0) != 0 && errno != ENOENT) rc = -errno;
  }
  if (rc == 0 && ::unlinkat(dirfd, dn.entry.c_str(), AT_REMOVEDIR) != 0) {
    rc = -errno;
    // Something appeared in the meantime: put the IV back so its name stays readable.
    if (have_iv && vault_.dir_ivs().create(sub, nullptr, &iv) == 0) sync_directory(sub);
  }
  ::close(sub);
  if (rc == 0) {
    change.removed(dir, dn.entry);
    NameMapping::remove_name_file(dirfd, dn);
  }
  fuse_reply_err(req, -rc);
}

void EncryptedFs::symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  if (std::strlen(link) > kMaxSymlinkTargetBytes) return (void)fuse_reply_err(req, ENAMETOOLONG);
  const StoredLink stored = vault_.names().store_symlink(link, false);
  add_entry(req, inode(parent), name, true, [&](int dirfd, const char* entry) {
    if (::symlinkat(stored.link.c_str(), dirfd, entry) == 0) return 0;
    if (errno != ENAMETOOLONG) return errno;
    // Too long for the backing filesystem's link targets: the long form, its file written first.
    const StoredLink l = NameMapping::long_link(stored.encoded);
    if (int rc = NameMapping::write_long_target(dirfd, l); rc < 0) return -rc;
    if (::symlinkat(l.link.c_str(), dirfd, entry) == 0) return 0;
    const int err = errno;
    NameMapping::remove_long_target_if_unused(dirfd, l.link);
    return err;
  });
}

void EncryptedFs::link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  Inode& in = inode(ino);
  PathFd pf = path_fd(in);
  if (!pf.ok()) return (void)fuse_reply_err(req, -pf.error());
  const std::string target = pf.proc_path();
  // A symlink with a long target: its file goes beside the new name too.
  std::optional<StoredLink> long_link;
  if (S_ISLNK(in.type)) {
    auto stored = NameMapping::read_link(pf.get(), "");
    std::lock_guard lk(in.mu);
    if (stored && is_long_target_file(*stored)) {
      if (!in.long_link || in.long_link->link.link != *stored) return (void)fuse_reply_err(req, EIO);
      long_link = in.long_link->link;
    }
  }
  // A new name for an existing node: it keeps its owner.
  add_entry(req, inode(newparent), newname, false, [&](int dirfd, const char* entry) {
    if (long_link) {
      if (int rc = NameMapping::write_long_target(dirfd, *long_link); rc < 0) return -rc;
    }
    if (::linkat(AT_FDCWD, target.c_str(), dirfd, entry, AT_SYMLINK_FOLLOW) == 0) return 0;
    const int err = errno;
    if (long_link) NameMapping::remove_long_target_if_unused(dirfd, long_link->link);
    return err;
  });
}

void EncryptedFs::rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                         const char* newname, unsigned int flags) {
  // RENAME_WHITEOUT (overlayfs on an upper layer here) leaves a 0:0 character device under the
  // source's encrypted name: the backing rename makes it, and it reads back as a whiteout under
  // the source's plaintext name, as any device node does (the daemon needs CAP_MKNOD for it).
  if (flags & ~static_cast<unsigned>(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
    return (void)fuse_reply_err(req, EINVAL);
  Inode& from = inode(parent);
  Inode& to = inode(newparent);
  PathFd from_at = path_fd(from);
  if (!from_at.ok()) return (void)fuse_reply_err(req, -from_at.error());
  PathFd to_at = path_fd(to);
  if (!to_at.ok()) return (void)fuse_reply_err(req, -to_at.error());
  const int from_fd = from_at.get(), to_fd = to_at.get();
  DiskName src, dst;
  int rc = disk_name(from, name, &src);
  if (rc == 0) rc = disk_name(to, newname, &dst);
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  // The inodes whose names change (the source, and an existing target, replaced or exchanged).
  struct stat src_st {}, dst_st {};
  if (::fstatat(from_fd, src.entry.c_str(), &src_st, AT_SYMLINK_NOFOLLOW) != 0) return (void)fuse_reply_err(req, errno);
  const bool dst_exists = ::fstatat(to_fd, dst.entry.c_str(), &dst_st, AT_SYMLINK_NOFOLLOW) == 0;
  NameChange change = inodes_.begin_change(src_st, dst_exists ? &dst_st : nullptr);
  if (dst_exists && !(flags & (RENAME_EXCHANGE | RENAME_NOREPLACE))) change.hold_b(to_fd, dst.entry);
  // The target's .name file goes first (its content follows from the name, so an existing one
  // is already right); remove it again only if we created it and the rename failed.
  const bool dst_name_existed = dst.is_long && entry_exists(to_fd, dst.name_file());
  rc = NameMapping::write_name_file(to_fd, dst);
  if (rc < 0) return (void)fuse_reply_err(req, -rc);
  // Symlinks with long targets keep their target's file in their own directory: copy it to the
  // directory they move to (both ways for an exchange) before they get there.
  std::optional<std::string> src_link, dst_link;
  if (S_ISLNK(src_st.st_mode)) src_link = NameMapping::read_link(from_fd, src.entry.c_str());
  if (dst_exists && S_ISLNK(dst_st.st_mode)) dst_link = NameMapping::read_link(to_fd, dst.entry.c_str());
  auto copy_long_target = [&](int from_dir, int to_dir, const std::optional<std::string>& link) {
    if (!link || !is_long_target_file(*link) || &from == &to) return 0;  // within a directory: it stays
    auto l = NameMapping::read_long_link(from_dir, *link);
    return l ? NameMapping::write_long_target(to_dir, *l) : -EIO;
  };
  rc = copy_long_target(from_fd, to_fd, src_link);
  if (rc == 0 && (flags & RENAME_EXCHANGE)) rc = copy_long_target(to_fd, from_fd, dst_link);
  // After the rename (or its failure) each long target's file stays where a link still holds it.
  auto tidy_long_targets = [&] {
    for (int d : {from_fd, to_fd})
      for (const auto* l : {&src_link, &dst_link})
        if (*l) NameMapping::remove_long_target_if_unused(d, **l);
  };
  if (rc < 0) {
    tidy_long_targets();
    if (dst.is_long && !dst_name_existed) NameMapping::remove_name_file(to_fd, dst);
    return (void)fuse_reply_err(req, -rc);
  }
  // Replacing a directory that is empty in the plaintext view: the backing rename would see its IV
  // file and refuse, so take the IV out first and put it back if the rename fails after all.
  int replaced_dir = -1;
  DirIv replaced_iv{};
  bool iv_taken = false;
  if (!(flags & (RENAME_EXCHANGE | RENAME_NOREPLACE))) {
    replaced_dir = ::openat(to_fd, dst.entry.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (replaced_dir >= 0 && check_only_iv(replaced_dir) == 0 &&
        vault_.dir_ivs().read(replaced_dir, &replaced_iv, label_of(to) + "/" + dst.entry) == 0)
      iv_taken = ::unlinkat(replaced_dir, kDirIvFileName, 0) == 0;
  }
  if (::renameat2(from_fd, src.entry.c_str(), to_fd, dst.entry.c_str(), flags) != 0) {
    int err = errno;
    if (iv_taken && vault_.dir_ivs().create(replaced_dir, nullptr, &replaced_iv) == 0) sync_directory(replaced_dir);
    if (replaced_dir >= 0) ::close(replaced_dir);
    if (dst.is_long && !dst_name_existed) NameMapping::remove_name_file(to_fd, dst);
    tidy_long_targets();
    return (void)fuse_reply_err(req, err);
  }
  if (replaced_dir >= 0) ::close(replaced_dir);
  // The whiteout is the caller's, as ext4 makes it (its owner, or a setgid directory's group):
  // made by root, an ordinary user could not remove it again from a sticky directory.
  if (flags & RENAME_WHITEOUT) give_to_caller(req, from_fd, src.entry);
  if (ChunkJournal* j = vault_.journal()) j->names_changed();  // open files' journal path hints
  change.renamed(from, src.entry, to, dst.entry, (flags & RENAME_EXCHANGE) != 0);
  // The source name is gone unless this was an exchange, a whiteout took its place or it was a
  // rename between two hard links of one file (which POSIX makes a no-op).
  if (src.is_long && !entry_exists(from_fd, src.entry)) NameMapping::remove_name_file(from_fd, src);
  tidy_long_targets();
  fuse_reply_err(req, 0);
}

}  // namespace gcfs::mount
