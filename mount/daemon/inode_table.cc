#include "mount/daemon/inode_table.h"

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
    log::error("out of file descriptors: the daemon holds one or two per open file, and caches descriptors of "
               "directories and other files only up to the budgets logged at mount. Raise the hard limit for the "
               "mount (ulimit -Hn, or LimitNOFILE= for a service) and mount again");
  });
}

Inode::~Inode() {
  content.reset();
  for (int f : content_fds) ::close(f);
  if (root_fd >= 0) ::close(root_fd);
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
  type_ = o.type_;
  o.type_ = 0;
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
  type_ = 0;
}

InodeTable::InodeTable(int root_fd, std::size_t fd_cache_limit, std::size_t dir_cache_limit)
    : files_(fd_cache_limit), dirs_(dir_cache_limit) {
  struct stat st {};
  if (::fstat(root_fd, &st) != 0) throw std::runtime_error(std::string("fstat of CIPHERDIR: ") + std::strerror(errno));
  auto root = std::make_unique<Inode>();
  root->root_fd = root_fd;
  root->src_dev = st.st_dev;
  root->src_ino = st.st_ino;
  root->type = S_IFDIR;
  root->is_root = true;
  root->nlookup = 2;
  root->id = FUSE_ROOT_ID;
  root_ = root.get();
  inodes_[{st.st_dev, st.st_ino}] = std::move(root);
  root_path_ = fd_path(root_fd);
}

InodeTable::~InodeTable() = default;

Inode& InodeTable::get(std::uint64_t ino) {
  if (ino == FUSE_ROOT_ID) return *root_;
  IdShard& shard = ids_[ino % kIdShards];
  {
    std::lock_guard lk(shard.mu);
    auto it = shard.map.find(ino);
    if (it != shard.map.end()) return *it->second;
  }
  log::error("the kernel named node " + std::to_string(ino) + ", which this mount does not know (forgotten "
             "already?); answering with a node that has no file");
  return stale_;
}

std::size_t InodeTable::size() {
  std::lock_guard lk(mu_);
  return inodes_.size() + detached_.size();
}

void InodeTable::index_locked(Inode& inode, const std::string* handle) {
  inode.id = 0;
  const std::pair<dev_t, ino_t> key{inode.src_dev, inode.src_ino};
  if (handle && !handle->empty()) {
    auto it = remembered_.find(key);
    if (it != remembered_.end() && it->second.handle == *handle) {
      IdShard& shard = ids_[it->second.id % kIdShards];
      std::lock_guard lk(shard.mu);
      if (!shard.map.count(it->second.id)) inode.id = it->second.id;  // not still used by a detached inode
    }
  }
  if (inode.id == 0) {
    inode.id = next_id_++;
    if (handle && !handle->empty() && remembered_.size() >= kMaxRemembered && !remembered_.count(key)) {
      static std::once_flag once;
      std::call_once(once, [] {
        log::warning("file handles: " + std::to_string(kMaxRemembered) + " files remembered; handles of files "
                     "seen from now on stay valid only while the kernel caches them");
      });
    } else if (handle && !handle->empty()) {
      if (auto it = remembered_.find(key); it != remembered_.end()) remembered_ids_.erase(it->second.id);
      remembered_[key] = {inode.id, *handle};
      remembered_ids_[inode.id] = key;
    }
  }
  IdShard& shard = ids_[inode.id % kIdShards];
  std::lock_guard lk(shard.mu);
  shard.map.emplace(inode.id, &inode);
}

InodeTable::HeldInode InodeTable::find_id(std::uint64_t ino) {
  // Under mu_, which a FORGET's drop holds too (maybe_drop_locked): the inode found is either
  // dropped already or held before it could be.
  std::lock_guard lk(mu_);
  Inode* found = root_;
  if (ino != FUSE_ROOT_ID) {
    IdShard& shard = ids_[ino % kIdShards];
    std::lock_guard slk(shard.mu);
    auto it = shard.map.find(ino);
    if (it == shard.map.end()) return {};
    found = it->second;
  }
  ++found->refs;
  return {this, found};
}

void InodeTable::release(Inode& inode) {
  Graveyard dead;  // destroyed outside the lock
  std::lock_guard lk(mu_);
  unref_locked(inode, dead);
}

std::optional<std::string> InodeTable::handle_of_id(std::uint64_t ino) {
  std::lock_guard lk(mu_);
  auto it = remembered_ids_.find(ino);
  if (it == remembered_ids_.end()) return std::nullopt;
  return remembered_.at(it->second).handle;
}

Inode& InodeTable::find_or_insert_unnamed(const struct stat& st, int fd, const std::string& handle) {
  std::vector<int> to_close;
  Inode* found = nullptr;
  {
    std::lock_guard lk(mu_);
    found = find_locked(st);
    if (found && !found->is_root && found->type != (st.st_mode & S_IFMT)) {
      detach_locked(*found);
      found = nullptr;
    }
    if (found) {
      ++found->nlookup;
      to_close.push_back(fd);
    } else {
      auto inode = std::make_unique<Inode>();
      inode->src_dev = st.st_dev;
      inode->src_ino = st.st_ino;
      inode->type = st.st_mode & S_IFMT;
      inode->nlookup = 1;
      inode->orphan_fd = fd;  // its way to the file until a lookup by name gives it a name
      found = inode.get();
      index_locked(*found, &handle);
      inodes_[{st.st_dev, st.st_ino}] = std::move(inode);
    }
  }
  close_all(to_close);
  return *found;
}

Inode& InodeTable::insert_new_unnamed(const struct stat& st, int fd, const std::string& handle) {
  std::lock_guard lk(mu_);
  if (Inode* stale = find_locked(st)) detach_locked(*stale);
  auto inode = std::make_unique<Inode>();
  inode->src_dev = st.st_dev;
  inode->src_ino = st.st_ino;
  inode->type = st.st_mode & S_IFMT;
  inode->nlookup = 1;
  inode->orphan_fd = fd;  // its only way to the file until a LINK gives it a name
  Inode* made = inode.get();
  index_locked(*made, handle.empty() ? nullptr : &handle);
  inodes_[{st.st_dev, st.st_ino}] = std::move(inode);
  return *made;
}

void InodeTable::unindex_locked(const Inode& inode) {
  IdShard& shard = ids_[inode.id % kIdShards];
  std::lock_guard lk(shard.mu);
  shard.map.erase(inode.id);
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

bool InodeTable::nameless(Inode& inode) {
  std::lock_guard lk(mu_);
  return inode.detached;
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
  unindex_locked(inode);
  if (inode.orphan_counted) --orphans_;  // the destructor closes it
  if (inode.cached_fd >= 0) {  // unpinned, so in the LRU list; the destructor closes it
    FdPool& pool = pool_of(inode);
    pool.lru.erase(inode.lru_pos);
    --pool.count;
  }
  auto names = std::move(inode.names);
  inode.names.clear();
  for (auto& n : names) unref_locked(*n.parent, dead);
  dead.push_back(std::move(owned));
}

Inode& InodeTable::find_or_insert(Inode& dir, const std::string& entry, const struct stat& st, int fd,
                                  const std::string* handle) {
  std::vector<int> to_close;
  Graveyard dead;  // destroyed outside the lock
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
      ++found->nlookup;
    } else {
      auto inode = std::make_unique<Inode>();
      inode->src_dev = st.st_dev;
      inode->src_ino = st.st_ino;
      inode->type = st.st_mode & S_IFMT;
      inode->nlookup = 1;
      found = inode.get();
      index_locked(*found, handle);
      inodes_[{st.st_dev, st.st_ino}] = std::move(inode);
    }
    if (!found->is_root) {
      if (S_ISDIR(found->type)) set_dir_name_locked(*found, dir, entry, dead);
      else add_name_locked(*found, dir, entry);
    }
    if (fd >= 0) {
      if (found->cached_fd < 0 && !found->is_root) install_locked(*found, fd, false, to_close);
      else to_close.push_back(fd);
    }
  }
  close_all(to_close);
  return *found;
}

Inode* InodeTable::find_known(Inode& dir, const std::string& entry, const struct stat& st) {
  Graveyard dead;  // destroyed outside the lock
  std::lock_guard lk(mu_);
  Inode* found = find_locked(st);
  if (!found) return nullptr;
  if (found->is_root) {
    ++found->nlookup;
    return found;
  }
  // Another type under a number we know: find_or_insert tells the two apart.
  if (found->type != (st.st_mode & S_IFMT)) return nullptr;
  if (S_ISDIR(found->type)) {
    if (found->cached_fd < 0) return nullptr;
    set_dir_name_locked(*found, dir, entry, dead);
  } else {
    add_name_locked(*found, dir, entry);
  }
  ++found->nlookup;
  return found;
}

void InodeTable::set_dir_name_locked(Inode& d, Inode& parent, const std::string& entry, Graveyard& dead) {
  // A directory has one name: the one it was last found under (a rename behind our back moves it).
  if (d.names.size() == 1 && d.names.front().parent == &parent && d.names.front().entry == entry) return;
  auto old = std::move(d.names);
  d.names.clear();
  add_name_locked(d, parent, entry);
  for (auto& n : old) unref_locked(*n.parent, dead);
}

void InodeTable::forget(Inode& inode, std::uint64_t n) {
  Graveyard dead;  // destroyed outside the lock
  std::lock_guard lk(mu_);
  if (inode.is_root) return;
  inode.nlookup = n >= inode.nlookup ? 0 : inode.nlookup - n;
  maybe_drop_locked(inode, dead);
}

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

std::string InodeTable::label_of(Inode& inode) {
  // The names up to the root, from the table alone (no descriptor is opened for a log message).
  std::string label;
  bool complete = false;
  {
    std::lock_guard lk(mu_);
    const Inode* cur = &inode;
    for (std::size_t depth = 0; depth < 4096; ++depth) {
      if (cur->is_root) {
        complete = true;
        break;
      }
      if (cur->names.empty()) break;
      label = "/" + cur->names.front().entry + label;
      cur = cur->names.front().parent;
    }
  }
  const std::string& root = root_path_;
  if (complete) return root + label;
  return root + (label.empty() ? "" : "/..." + label) + " (inode " + std::to_string(inode.src_ino) +
         (label.empty() ? ", no name left)" : ")");
}

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
