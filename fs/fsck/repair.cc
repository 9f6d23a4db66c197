// fsck --repair's moves: lost+found made (or checked) beneath CIPHERDIR, each unreadable item
// renamed into it between held descriptors, and a line for it in the index.
#include "fs/fsck/checker.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "fs/log.h"

namespace gcfs::fsck {

std::string index_field(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}


bool append_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

int rename_noreplace(int from_dir, const std::string& from, int to_dir, const std::string& to) {
  if (::renameat2(from_dir, from.c_str(), to_dir, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  struct stat st {};
  if (::fstatat(to_dir, to.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    errno = EEXIST;
    return -1;
  }
  return ::renameat(from_dir, from.c_str(), to_dir, to.c_str());
}

// --repair, at the first move: CIPHERDIR/gpucryptfs.lost+found as a real directory beneath
// CIPHERDIR's descriptor, and its index opened beneath that for appending, as a regular file
// with no other hard link. When either is anything else, nothing is moved at all.
bool Checker::open_lost_found() {
  if (index_) return true;
  if (!report_.repair_refused.empty()) return false;
  if (::mkdirat(root_fd_, kLostFoundDirName, 0700) != 0 && errno != EEXIST) {
    refuse_repair(kLostFoundDirName, std::string("cannot be created (") + std::strerror(errno) + ")");
    return false;
  }
  OpenResult dir = open_beneath(root_fd_, kLostFoundDirName, FileType::Directory, O_RDONLY);
  if (!dir) {
    refuse_repair(kLostFoundDirName, describe(dir));
    return false;
  }
  const std::string index = join(kLostFoundDirName, kLostFoundIndexName);
  OpenResult idx = open_beneath(dir.fd.get(), kLostFoundIndexName, FileType::Regular, O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (!idx) {
    refuse_repair(index, describe(idx));
    return false;
  }
  struct stat st {};
  if (::fstat(idx.fd.get(), &st) != 0 || st.st_nlink != 1) {
    refuse_repair(index, "has " + std::to_string(st.st_nlink) + " hard links (one may be a file outside the vault)");
    return false;
  }
  lost_found_ = std::move(dir.fd);
  index_ = std::move(idx.fd);
  return true;
}

// Moves one unreadable item from the directory descriptor the check read it through into
// lost+found: renameat between two held descriptors, so no path is resolved again, and only
// when the name still holds the inode the check saw.
void Checker::move_aside(int dirfd, const PendingMove& m) {
  FsckProblem& p = report_.problems[m.problem];
  if (!open_lost_found()) {
    p.what += "; not moved: lost+found cannot be used";
    return;
  }
  if (options_.before_move) options_.before_move(p.cipher_path);
  struct stat st {};
  if (::fstatat(dirfd, m.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != m.dev || st.st_ino != m.ino) {
    p.what += "; not moved: it was removed or replaced after the check";
    return;
  }
  const std::string base = m.name.substr(0, 200);
  std::string target;
  int rc = -1;
  for (unsigned n = 1; n < 1000000; ++n) {
    target = std::to_string(n) + "-" + base;
    rc = rename_noreplace(dirfd, m.name, lost_found_.get(), target);
    if (rc == 0 || errno != EEXIST) break;
  }
  if (rc != 0) {
    p.what += std::string("; could not move it aside: ") + std::strerror(errno);
    return;
  }
  if (m.with_name_file) {
    const std::string suffix(kLongNameSuffix);
    (void)rename_noreplace(dirfd, m.name + suffix, lost_found_.get(), target + suffix);
  }
  p.moved_to = join(kLostFoundDirName, target);
  const std::string line = index_field(target) + "\tfrom " + index_field(p.cipher_path) + "\tplaintext " +
                           (p.plain_path.empty() ? "(unknown)" : index_field(p.plain_path)) + "\t" +
                           index_field(p.what) + "\n";
  if (!append_all(index_.get(), line)) log::warning(std::string("cannot write the lost+found index: ") + std::strerror(errno));
}

}  // namespace gcfs::fsck
