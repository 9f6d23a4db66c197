#include "mount/inode_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "fs/log.h"
#include "fs/safe_open.h"
#include "mount/fuse_api.h"

namespace gcfs::mount {
namespace {

std::string fd_path(int fd) {
  char buf[4096];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

void close_all(const std::vector<int>& fds) {
  for (int f : fds) ::close(f);
}

}  // namespace

void warn_out_of_descriptors() {
  // Say once what the user can do instead of failing calls with a bare EMFILE.
  static std::once_flag once;
  std::call_once(once, [] {
    log::error("out of file descriptors: the daemon holds one per directory the kernel has cached and one or two "
               "per open file (descriptors of other files are cached only up to the budget logged at mount). "
               "Raise the hard limit for the mount (ulimit -Hn, or LimitNOFILE= for a service) and mount again; "
               "'echo 2 > /proc/sys/vm/drop_caches' makes the kernel release cached directories meanwhile");
  });
}

Inode::~Inode() {
  content.reset();
  for (int f : content_fds) ::close(f);
  if (dir_fd >= 0) ::close(dir_fd);
  if (cached_fd >= 0) ::close(cached_fd);
  if (orphan_fd >= 0) ::close(orphan_fd);
}

PathFd& PathFd::operator=(PathFd&& o) noexcept {
  if (this == &o) return *this;
  reset();
  table_ = o.table_;
  pinned_ = o.pinned_;
  fd_ = o.fd_;
  owned_ = o.owned_;
  err_ = o.err_;
  o.table_ = nullptr;
  o.pinned_ = nullptr;
  o.fd_ = -1;
  o.owned_ = false;
  o.err_ = -EBADF;
  return *this;
}

void PathFd::reset() {
  if (table_ && pinned_) table_->unpin(*pinned_);
  else if (owned_ && fd_ >= 0) ::close(fd_);
  table_ = nullptr;
  pinned_ = nullptr;
  fd_ = -1;
  owned_ = false;
  err_ = -EBADF;
}

InodeTable::InodeTable(int root_fd, std::size_t fd_cache_limit) : cache_limit_(fd_cache_limit < 1 ? 1 : fd_cache_limit) {
  struct stat st {};
  if (::fstat(root_fd, &st) != 0) throw std::runtime_error(std::string("fstat of CIPHERDIR: ") + std::strerror(errno));
  auto root = std::make_unique<Inode>();
  root->dir_fd = root_fd;
  root->src_dev = st.st_dev;
  root->src_ino = st.st_ino;
  root->type = S_IFDIR;
  root->is_root = true;
  root->nlookup = 2;
  root_ = root.get();
  inodes_[{st.st_dev, st.st_ino}] = std::move(root);
}

InodeTable::~InodeTable() = default;

Inode& InodeTable::get(std::uint64_t ino) {
  if (ino == FUSE_ROOT_ID) return *root_;
  return *reinterpret_cast<Inode*>(ino);
}

std::uint64_t InodeTable::id_of(const Inode& inode) const {
  if (&inode == root_) return FUSE_ROOT_ID;
  return reinterpret_cast<std::uint64_t>(&inode);
}

Inode* InodeTable::find_locked(const struct stat& st) {
  auto it = inodes_.find({st.st_dev, st.st_ino});
  return it == inodes_.end() ? nullptr : it->second.get();
}

void InodeTable::add_name_locked(Inode& inode, Inode& dir, const std::string& entry) {
  for (const auto& n : inode.names)
    if (n.parent == &dir && n.entry == entry) return;
  inode.names.push_back({&dir, entry});
  ++dir.refs;
  ++inode.names_gen;
}

bool InodeTable::remove_name_locked(Inode& inode, const Inode& dir, const std::string& entry, Graveyard& dead) {
  for (auto it = inode.names.begin(); it != inode.names.end(); ++it) {
    if (it->parent != &dir || it->entry != entry) continue;
    Inode* parent = it->parent;
    inode.names.erase(it);
    ++inode.names_gen;
    unref_locked(*parent, dead);
    return true;
  }
  return false;
}

void InodeTable::detach_locked(Inode& inode) {
  if (inode.detached || inode.is_root) return;
  auto it = inodes_.find({inode.src_dev, inode.src_ino});
  if (it == inodes_.end() || it->second.get() != &inode) return;
  inode.detached = true;
  detached_[&inode] = std::move(it->second);
  inodes_.erase(it);
}

void InodeTable::unref_locked(Inode& inode, Graveyard& dead) {
  --inode.refs;
  maybe_drop_locked(inode, dead);
}

void InodeTable::maybe_drop_locked(Inode& inode, Graveyard& dead) {
  if (inode.is_root || inode.nlookup > 0 || inode.refs > 0 || inode.fd_pins > 0 || inode.changing > 0) return;
  std::unique_ptr<Inode> owned;
  if (inode.detached) {
    auto it = detached_.find(&inode);
    if (it == detached_.end()) return;
    owned = std::move(it->second);
    detached_.erase(it);
  } else {
    auto it = inodes_.find({inode.src_dev, inode.src_ino});
    if (it == inodes_.end() || it->second.get() != &inode) return;
    owned = std::move(it->second);
    inodes_.erase(it);
  }
  if (inode.cached_fd >= 0) {  // unpinned, so in the LRU list; the destructor closes it
    lru_.erase(inode.lru_pos);
    --cache_count_;
  }
  auto names = std::move(inode.names);
  inode.names.clear();
  for (auto& n : names) unref_locked(*n.parent, dead);
  dead.push_back(std::move(owned));
}

Inode& InodeTable::find_or_insert(Inode& dir, const std::string& entry, const struct stat& st, int fd) {
  int spare = -1;
  Inode* found = nullptr;
  {
    std::lock_guard lk(mu_);
    found = find_locked(st);
    // A different file under a number we still know: CIPHERDIR was changed behind our back and
    // the number reused. The old inode stays for the kernel to forget; this file gets a new one.
    if (found && !found->is_root && found->type != (st.st_mode & S_IFMT)) {
      detach_locked(*found);
      found = nullptr;
    }
    if (found) {
      spare = fd;
      if (!S_ISDIR(found->type)) add_name_locked(*found, dir, entry);
      ++found->nlookup;
    } else {
      auto inode = std::make_unique<Inode>();
      inode->src_dev = st.st_dev;
      inode->src_ino = st.st_ino;
      inode->type = st.st_mode & S_IFMT;
      inode->nlookup = 1;
      if (S_ISDIR(inode->type)) {
        inode->dir_fd = fd;
      } else {
        spare = fd;
        add_name_locked(*inode, dir, entry);
      }
      found = inode.get();
      inodes_[{st.st_dev, st.st_ino}] = std::move(inode);
    }
  }
  if (spare >= 0) ::close(spare);
  return *found;
}

void InodeTable::forget(Inode& inode, std::uint64_t n) {
  Graveyard dead;  // destroyed outside the lock
  std::lock_guard lk(mu_);
  if (inode.is_root) return;
  inode.nlookup = n >= inode.nlookup ? 0 : inode.nlookup - n;
  maybe_drop_locked(inode, dead);
}

void InodeTable::evict_locked(std::size_t keep, std::vector<int>& to_close) {
  while (cache_count_ > keep && !lru_.empty()) {
    Inode* victim = lru_.back();
    lru_.pop_back();
    to_close.push_back(victim->cached_fd);
    victim->cached_fd = -1;
    --cache_count_;
  }
}

std::size_t InodeTable::drop_cached_fds() {
  std::vector<int> to_close;
  {
    std::lock_guard lk(mu_);
    evict_locked(0, to_close);
  }
  close_all(to_close);
  return to_close.size();
}

std::size_t InodeTable::cached_fds() {
  std::lock_guard lk(mu_);
  return cache_count_;
}

void InodeTable::unpin(Inode& inode) {
  Graveyard dead;
  std::lock_guard lk(mu_);
  if (--inode.fd_pins == 0) {
    lru_.push_front(&inode);
    inode.lru_pos = lru_.begin();
  }
  maybe_drop_locked(inode, dead);
}

PathFd InodeTable::path_fd(Inode& inode) {
  PathFd out;
  if (inode.dir_fd >= 0) {  // directories: their own descriptor, open as long as the inode lives
    out.fd_ = inode.dir_fd;
    out.err_ = 0;
    return out;
  }
  auto pin_cached_locked = [&] {  // cached_fd unpinned sits in the LRU list; pinned, it leaves it
    if (inode.fd_pins++ == 0) lru_.erase(inode.lru_pos);
    out.table_ = this;
    out.pinned_ = &inode;
    out.fd_ = inode.cached_fd;
    out.err_ = 0;
  };
  std::vector<std::string> failures;  // names that lead elsewhere now, for the log
  int err = ESTALE;
  for (int attempt = 0;; ++attempt) {
    std::vector<InodeName> names;  // each holds a ref of its parent while we use it
    std::uint64_t gen = 0;
    {
      std::lock_guard lk(mu_);
      if (inode.cached_fd >= 0) {
        pin_cached_locked();
        return out;
      }
      if (inode.names.empty() && inode.orphan_fd >= 0) {  // lives as long as the inode: borrowed
        out.fd_ = inode.orphan_fd;
        out.err_ = 0;
        return out;
      }
      names = inode.names;
      for (auto& n : names) ++n.parent->refs;
      gen = inode.names_gen;
    }
    int fd = -1;
    bool hard_error = false;  // out of descriptors, permissions: not a question of names
    failures.clear();
    for (const auto& n : names) {
      int f = ::openat(n.parent->dir_fd, n.entry.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (f < 0 && (errno == EMFILE || errno == ENFILE) && drop_cached_fds() > 0)
        f = ::openat(n.parent->dir_fd, n.entry.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (f < 0) {
        const int e = errno;
        if (e == ENOENT) {
          failures.push_back(fd_path(n.parent->dir_fd) + "/" + n.entry + ": gone");
          continue;
        }
        if (e == EMFILE || e == ENFILE) warn_out_of_descriptors();
        err = e;
        hard_error = true;
        break;
      }
      struct stat st {};
      // The type too: a number the backing filesystem gave again, to a FIFO or device planted
      // under the old name, must not pass for the regular file we knew (its descriptor would be
      // reopened for I/O through /proc).
      if (::fstat(f, &st) != 0 || st.st_dev != inode.src_dev || st.st_ino != inode.src_ino ||
          (st.st_mode & S_IFMT) != inode.type) {
        failures.push_back(fd_path(n.parent->dir_fd) + "/" + n.entry + ": now another file (a " +
                           file_type_name(st.st_mode) + ", inode " + std::to_string(st.st_ino) + "; was a " +
                           file_type_name(inode.type) + ", inode " + std::to_string(inode.src_ino) + ")");
        ::close(f);
        continue;
      }
      fd = f;
      break;
    }
    Graveyard dead;
    std::vector<int> to_close;
    bool retry = false;
    {
      std::unique_lock lk(mu_);
      for (auto& n : names) unref_locked(*n.parent, dead);
      if (fd >= 0) {
        if (inode.cached_fd >= 0) {  // another call cached one meanwhile
          to_close.push_back(fd);
          pin_cached_locked();
        } else {
          evict_locked(cache_limit_ - 1, to_close);
          if (cache_count_ < cache_limit_) {
            inode.cached_fd = fd;
            ++cache_count_;
            inode.fd_pins = 1;  // not in the LRU list while pinned
            out.table_ = this;
            out.pinned_ = &inode;
            out.fd_ = fd;
            out.err_ = 0;
          } else {  // every cached descriptor is in use: this one serves this call only
            out.fd_ = fd;
            out.owned_ = true;
            out.err_ = 0;
          }
        }
      } else if (!hard_error && attempt < 100 && (inode.changing > 0 || inode.names_gen != gen)) {
        // An unlink or rename of one of its names is under way or just happened: wait for it
        // and try the names it leaves.
        changed_.wait_for(lk, std::chrono::milliseconds(20), [&] { return inode.changing == 0; });
        retry = true;
      }
    }
    dead.clear();
    close_all(to_close);
    if (out.ok()) return out;
    if (!retry) {
      if (hard_error) {
        out.err_ = -err;
        return out;
      }
      break;
    }
  }
  // Every name is gone (or there was none left): an open file still has its content descriptor.
  {
    std::lock_guard lk(inode.mu);
    if (!inode.content_fds.empty()) {
      int d = ::fcntl(inode.content_fds.back(), F_DUPFD_CLOEXEC, 0);
      if (d >= 0) {
        out.fd_ = d;
        out.owned_ = true;
        out.err_ = 0;
      } else {
        err = errno;
      }
    }
  }
  if (!failures.empty()) {
    std::string msg = "inode " + std::to_string(inode.src_ino) + " cannot be found by its names: ";
    for (std::size_t i = 0; i < failures.size(); ++i) msg += (i ? "; " : "") + failures[i];
    msg += ". CIPHERDIR was changed behind the daemon's back (files renamed, removed or replaced there while "
           "mounted)";
    msg += out.ok() ? "; the file is open, so its open descriptor serves" : "; answering ESTALE";
    log::error(msg);
  } else if (!out.ok() && err == ESTALE) {
    log::warning("inode " + std::to_string(inode.src_ino) + " of " + fd_path(root_->dir_fd) +
                 " has no name left and is not open; answering ESTALE");
  }
  if (!out.ok()) out.err_ = -err;
  return out;
}

std::string InodeTable::label_of(Inode& inode) {
  if (inode.dir_fd >= 0) {
    std::string p = fd_path(inode.dir_fd);
    return p.empty() ? fd_path(root_->dir_fd) + " (directory inode " + std::to_string(inode.src_ino) + ")" : p;
  }
  Inode* parent = nullptr;
  std::string entry;
  {
    std::lock_guard lk(mu_);
    if (!inode.names.empty()) {
      parent = inode.names.front().parent;
      entry = inode.names.front().entry;
      ++parent->refs;
    }
  }
  if (!parent) return fd_path(root_->dir_fd) + " (inode " + std::to_string(inode.src_ino) + ", no name left)";
  std::string label = label_of(*parent) + "/" + entry;
  Graveyard dead;
  std::lock_guard lk(mu_);
  unref_locked(*parent, dead);
  return label;
}

NameChange InodeTable::begin_change(const struct stat& a, const struct stat* b) {
  NameChange c(this);
  std::lock_guard lk(mu_);
  if (b && a.st_dev == b->st_dev && a.st_ino == b->st_ino) {
    c.same_ = true;
    return c;
  }
  if (!S_ISDIR(a.st_mode)) c.a_ = find_locked(a);
  if (b && !S_ISDIR(b->st_mode)) c.b_ = find_locked(*b);
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
      b_hold_(o.b_hold_), same_(o.same_) {
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
  // Only an inode the kernel knows can be asked for again; a directory has its own descriptor.
  if (!in || nlink > 1 || in->dir_fd >= 0) return -1;
  return ::openat(dirfd, entry.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

void NameChange::adopt_locked(Inode& in, int& held) {
  if (held < 0 || in.orphan_fd >= 0 || !in.names.empty()) return;
  struct stat st {};
  // The entry might have been swapped between our stat and our open: keep only this inode's.
  if (::fstat(held, &st) != 0 || st.st_dev != in.src_dev || st.st_ino != in.src_ino) return;
  in.orphan_fd = held;
  held = -1;
}

void NameChange::removed(Inode& dir, const std::string& entry) {
  if (!a_) return;
  InodeTable::Graveyard dead;
  std::lock_guard lk(table_->mu_);
  table_->remove_name_locked(*a_, dir, entry, dead);
  // Its last name: the number may be given to a new file, which must not find this inode.
  if (a_nlink_ <= 1) {
    table_->detach_locked(*a_);
    adopt_locked(*a_, a_hold_);
  }
}

void NameChange::renamed(Inode& from, const std::string& src, Inode& to, const std::string& dst, bool exchange) {
  if (same_ || (!a_ && !b_)) return;
  InodeTable::Graveyard dead;
  std::lock_guard lk(table_->mu_);
  if (b_ && !exchange) {  // replaced: it lost that name
    table_->remove_name_locked(*b_, to, dst, dead);
    if (b_nlink_ <= 1) {
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
