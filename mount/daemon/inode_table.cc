// The inode table itself: inodes by node ID and by backing identity, their names, lookups and
// forgetting. The descriptor caches and the reopening of a backing file by its names are in
// inode_path_fds.cc, the bookkeeping of unlinks and renames in name_change.cc.
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

}  // namespace gcfs::mount
