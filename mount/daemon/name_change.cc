// NameChange: what an unlink or rename tells the inode table, so that the inodes it moves or
// removes keep their names right, and calls that open them meanwhile wait for the change instead
// of failing (InodeTable::begin_change).
#include "mount/daemon/inode_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "fs/log.h"
#include "fs/safe_open.h"
#include "mount/daemon/descriptor_paths.h"
#include "mount/fuse_api.h"

namespace gcfs::mount {

NameChange InodeTable::begin_change(const struct stat& a, const struct stat* b) {
  NameChange c(this);
  std::lock_guard lk(mu_);
  if (b && a.st_dev == b->st_dev && a.st_ino == b->st_ino) {
    c.same_ = true;
    return c;
  }
  c.a_ = find_locked(a);
  if (b) c.b_ = find_locked(*b);
  if (c.a_ && c.a_->is_root) c.a_ = nullptr;
  if (c.b_ && c.b_->is_root) c.b_ = nullptr;
  if (c.a_) {
    ++c.a_->refs;
    ++c.a_->changing;
    c.a_nlink_ = a.st_nlink;
  }
  if (c.b_) {
    ++c.b_->refs;
    ++c.b_->changing;
    c.b_nlink_ = b->st_nlink;
  }
  return c;
}

NameChange::NameChange(NameChange&& o) noexcept
    : table_(o.table_), a_(o.a_), b_(o.b_), a_nlink_(o.a_nlink_), b_nlink_(o.b_nlink_), a_hold_(o.a_hold_),
      b_hold_(o.b_hold_), a_hold_verified_(o.a_hold_verified_), same_(o.same_) {
  o.table_ = nullptr;
  o.a_ = o.b_ = nullptr;
  o.a_hold_ = o.b_hold_ = -1;
}

NameChange::~NameChange() {
  for (int f : {a_hold_, b_hold_})
    if (f >= 0) ::close(f);
  if (!table_ || (!a_ && !b_)) return;
  InodeTable::Graveyard dead;
  {
    std::lock_guard lk(table_->mu_);
    for (Inode* in : {a_, b_}) {
      if (!in) continue;
      --in->changing;
      table_->unref_locked(*in, dead);
    }
  }
  table_->changed_.notify_all();
}

int NameChange::hold(const Inode* in, nlink_t nlink, int dirfd, const std::string& entry) {
  // Only an inode the kernel knows can be asked for again; a directory is not open once removed.
  if (!in || nlink > 1 || S_ISDIR(in->type)) return -1;
  return ::openat(dirfd, entry.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

void NameChange::hold_a_opened(int fd) {
  if (fd < 0) return;
  if (!a_ || a_nlink_ > 1 || S_ISDIR(a_->type)) {  // as hold(): nothing to keep
    ::close(fd);
    return;
  }
  a_hold_ = fd;
  a_hold_verified_ = true;
}

void NameChange::adopt_locked(Inode& in, int& held, bool verified) {
  if (held < 0 || in.orphan_fd >= 0 || !in.names.empty()) return;
  if (table_->orphans_ >= table_->files_.limit) return;  // bounded: closed with the NameChange
  struct stat st {};
  // The entry might have been swapped between our stat and our open: keep only this inode's.
  if (!verified && (::fstat(held, &st) != 0 || st.st_dev != in.src_dev || st.st_ino != in.src_ino)) return;
  in.orphan_fd = held;
  in.orphan_counted = true;
  ++table_->orphans_;
  held = -1;
}

void NameChange::removed(Inode& dir, const std::string& entry) {
  if (!a_) return;
  InodeTable::Graveyard dead;
  std::lock_guard lk(table_->mu_);
  table_->remove_name_locked(*a_, dir, entry, dead);
  // Its last name (a directory has one): the number may be given to a new file, which must not
  // find this inode.
  if (a_nlink_ <= 1 || S_ISDIR(a_->type)) {
    table_->detach_locked(*a_);
    adopt_locked(*a_, a_hold_, a_hold_verified_);
  }
}

void NameChange::renamed(Inode& from, const std::string& src, Inode& to, const std::string& dst, bool exchange) {
  if (same_ || (!a_ && !b_)) return;
  InodeTable::Graveyard dead;
  std::lock_guard lk(table_->mu_);
  if (b_ && !exchange) {  // replaced: it lost that name
    table_->remove_name_locked(*b_, to, dst, dead);
    if (b_nlink_ <= 1 || S_ISDIR(b_->type)) {
      table_->detach_locked(*b_);
      adopt_locked(*b_, b_hold_);
    }
  }
  if (a_) {
    table_->add_name_locked(*a_, to, dst);
    table_->remove_name_locked(*a_, from, src, dead);
  }
  if (b_ && exchange) {
    // a_ may already have been moved to (to, dst), which is b's old name: add b's new name first.
    table_->add_name_locked(*b_, from, src);
    table_->remove_name_locked(*b_, to, dst, dead);
  }
}

}  // namespace gcfs::mount
