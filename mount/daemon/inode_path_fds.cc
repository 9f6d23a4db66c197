// The inode table's O_PATH descriptors: the two bounded caches (directories, other files) that
// keep an inode's backing descriptor between requests, and what finds a backing file again by its
// names, checked to be the same file, once its descriptor was let go (dir_path_fd, file_path_fd).
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

void InodeTable::evict_locked(FdPool& pool, std::size_t keep, std::vector<int>& to_close) {
  while (pool.count > keep && !pool.lru.empty()) {
    Inode* victim = pool.lru.back();
    pool.lru.pop_back();
    to_close.push_back(victim->cached_fd);
    victim->cached_fd = -1;
    --pool.count;
  }
}

std::size_t InodeTable::drop_cached_fds() {
  std::vector<int> to_close;
  {
    std::lock_guard lk(mu_);
    evict_locked(files_, 0, to_close);
    evict_locked(dirs_, 0, to_close);
  }
  close_all(to_close);
  return to_close.size();
}

std::size_t InodeTable::cached_fds() {
  std::lock_guard lk(mu_);
  return files_.count;
}

std::size_t InodeTable::cached_dir_fds() {
  std::lock_guard lk(mu_);
  return dirs_.count;
}

void InodeTable::unpin(Inode& inode) {
  Graveyard dead;
  std::lock_guard lk(mu_);
  if (--inode.fd_pins == 0) {
    FdPool& pool = pool_of(inode);
    pool.lru.push_front(&inode);
    inode.lru_pos = pool.lru.begin();
  }
  maybe_drop_locked(inode, dead);
}

PathFd InodeTable::borrow_locked(Inode& inode) {
  PathFd out;
  out.err_ = 0;
  if (inode.root_fd >= 0) {  // open as long as the table lives
    out.fd_ = inode.root_fd;
    return out;
  }
  // A cached descriptor not in use sits in its LRU list; pinned, it leaves it.
  if (inode.fd_pins++ == 0) pool_of(inode).lru.erase(inode.lru_pos);
  out.table_ = this;
  out.pinned_ = &inode;
  out.fd_ = inode.cached_fd;
  out.type_ = inode.type;  // what the descriptor was checked to be when it was cached
  return out;
}

PathFd InodeTable::install_locked(Inode& inode, int fd, bool pinned, std::vector<int>& to_close) {
  PathFd out;
  out.type_ = inode.type;  // every caller checked fd to be the inode's type as it opened it
  FdPool& pool = pool_of(inode);
  evict_locked(pool, pool.limit - 1, to_close);
  if (pool.count < pool.limit) {
    inode.cached_fd = fd;
    ++pool.count;
    if (pinned) {
      inode.fd_pins = 1;  // not in the LRU list while pinned
      out.table_ = this;
      out.pinned_ = &inode;
      out.fd_ = fd;
      out.err_ = 0;
    } else {
      pool.lru.push_front(&inode);
      inode.lru_pos = pool.lru.begin();
    }
  } else if (pinned) {  // every cached descriptor is in use: this one serves this call only
    out.fd_ = fd;
    out.owned_ = true;
    out.err_ = 0;
  } else {
    to_close.push_back(fd);
  }
  return out;
}

PathFd InodeTable::path_fd(Inode& inode) {
  return inode.root_fd >= 0 || S_ISDIR(inode.type) ? dir_path_fd(inode) : file_path_fd(inode);
}

PathFd InodeTable::dir_path_fd(Inode& dir) {
  // Walks up to the nearest directory with a descriptor (the root at worst), then opens each one
  // below it by name, caching each: no recursion, however deep the tree.
  for (int attempt = 0;; ++attempt) {
    std::vector<Inode*> chain;  // dir first; each holds a ref while we use it
    std::vector<std::string> entries;
    std::vector<std::uint64_t> gens;
    PathFd at;
    {
      std::lock_guard lk(mu_);
      Inode* cur = &dir;
      while (cur->root_fd < 0 && cur->cached_fd < 0 && cur->orphan_fd < 0 && !cur->names.empty()) {
        chain.push_back(cur);
        entries.push_back(cur->names.front().entry);
        gens.push_back(cur->names_gen);
        ++cur->refs;
        cur = cur->names.front().parent;
      }
      if (cur->root_fd >= 0 || cur->cached_fd >= 0) {
        at = borrow_locked(*cur);
      } else if (cur->orphan_fd >= 0) {  // reached by handle: lives as long as the inode, borrowed
        at.fd_ = cur->orphan_fd;
        at.err_ = 0;
      }
    }
    int err = ESTALE;
    std::string failure;  // for the log: a name that leads elsewhere now
    std::size_t done = 0;
    if (at.ok()) {
      for (std::size_t i = chain.size(); i-- > 0; ++done) {
        Inode& c = *chain[i];
        int f = ::openat(at.get(), entries[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (f < 0 && (errno == EMFILE || errno == ENFILE) && drop_cached_fds() > 0)
          f = ::openat(at.get(), entries[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st {};
        if (f < 0) {
          err = errno;
          if (err == EMFILE || err == ENFILE) warn_out_of_descriptors();
          if (err == ENOENT || err == ENOTDIR || err == ELOOP) {
            failure = fd_path(at.get()) + "/" + entries[i] + ": gone";
            err = ESTALE;
          }
          break;
        }
        if (::fstat(f, &st) != 0 || st.st_dev != c.src_dev || st.st_ino != c.src_ino) {
          failure = fd_path(at.get()) + "/" + entries[i] + ": now another directory (inode " + std::to_string(st.st_ino) +
                    ", not " + std::to_string(c.src_ino) + ")";
          ::close(f);
          break;
        }
        std::vector<int> to_close;
        PathFd next;
        {
          std::lock_guard lk(mu_);
          if (c.cached_fd >= 0) {  // another call cached one meanwhile
            to_close.push_back(f);
            next = borrow_locked(c);
          } else {
            next = install_locked(c, f, true, to_close);
          }
        }
        close_all(to_close);
        at = std::move(next);  // unpins the one above
      }
    }
    bool retry = false;
    Graveyard dead;
    {
      std::unique_lock lk(mu_);
      const bool complete = at.ok() && done == chain.size();
      if (!complete && err == ESTALE && attempt < 100) {
        // A rename through this mount under way or just done: wait for it, take the new names.
        bool changed = false;
        for (std::size_t i = 0; i < chain.size(); ++i)
          changed = changed || chain[i]->changing > 0 || chain[i]->names_gen != gens[i];
        if (changed) {
          changed_.wait_for(lk, std::chrono::milliseconds(20), [&] {
            for (Inode* c : chain)
              if (c->changing > 0) return false;
            return true;
          });
          retry = true;
        }
      }
      for (Inode* c : chain) unref_locked(*c, dead);
      if (complete) return at;
    }
    if (retry) continue;
    if (!failure.empty())
      log::error("directory inode " + std::to_string(dir.src_ino) + " cannot be found by its name: " + failure +
                 ". CIPHERDIR was changed behind the daemon's back (directories renamed, removed or replaced there "
                 "while mounted); answering ESTALE");
    PathFd out;
    out.err_ = -err;
    return out;
  }
}

PathFd InodeTable::file_path_fd(Inode& inode) {
  PathFd out;
  auto pin_cached_locked = [&] { out = borrow_locked(inode); };
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
      PathFd parent = dir_path_fd(*n.parent);
      if (!parent.ok()) {
        if (parent.error() == -ESTALE) continue;  // logged there
        err = -parent.error();
        hard_error = true;
        break;
      }
      int f = ::openat(parent.get(), n.entry.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (f < 0 && (errno == EMFILE || errno == ENFILE) && drop_cached_fds() > 0)
        f = ::openat(parent.get(), n.entry.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (f < 0) {
        const int e = errno;
        if (e == ENOENT) {
          failures.push_back(fd_path(parent.get()) + "/" + n.entry + ": gone");
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
        failures.push_back(fd_path(parent.get()) + "/" + n.entry + ": now another file (a " +
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
          out = install_locked(inode, fd, true, to_close);
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
    log::warning("inode " + std::to_string(inode.src_ino) + " of " + fd_path(root_->root_fd) +
                 " has no name left and is not open; answering ESTALE");
  }
  if (!out.ok()) out.err_ = -err;
  return out;
}

}  // namespace gcfs::mount
