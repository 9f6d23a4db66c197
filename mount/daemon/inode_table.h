// The daemon's inodes, keyed like passthrough_hp's by the backing file's (st_dev, st_ino): every
// name of a hard-linked file maps to one Inode, so all its handles share one ContentFile and its
// chunk locks. Every operation works relative to descriptors (*at calls), never by path from
// CIPHERDIR, so renames underneath stay harmless.
//
// Descriptors: the kernel may remember hundreds of thousands of inodes (it forgets them only under
// memory pressure), far more than the descriptor limit allows, and under --allow-other any user
// decides how many: so no inode but the root holds a descriptor for its whole life. Every other
// inode remembers where it lives: its parent directory's Inode and its ciphertext entry name there
// (every name it is known by, for hard links; a directory has one), kept current by rename, link,
// unlink and rmdir. path_fd() gives a descriptor for a call: a cached one from a bounded LRU cache
// (one for directories, one for other files), pinned against eviction while in use, or one opened
// again by name from its parent's descriptor (itself from the cache or opened again, up to the
// root, without recursion) and checked to be the same file (st_dev, st_ino). A file whose every
// name is gone but that is still open is reached through its open content descriptor; one whose
// last name went through our unlink or rename keeps a descriptor taken just before (orphan_fd)
// until the kernel forgets it.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <cerrno>
#include <condition_variable>
#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "crypto/name_cipher.h"
#include "fs/content/content_file.h"
#include "fs/name_mapping.h"
#include "mount/daemon/fd_limit.h"

namespace gcfs::mount {

struct Inode;
class InodeTable;

// A name of an inode: the directory it is in (which it keeps alive through one of that directory
// Inode's refs) and its ciphertext entry name there.
struct InodeName {
  Inode* parent;
  std::string entry;
};

struct Inode {
  Inode() = default;
  Inode(const Inode&) = delete;
  ~Inode();

  // The root only: CIPHERDIR's descriptor, owned and open for the table's whole life. -1 for every
  // other inode: use InodeTable::path_fd().
  int root_fd = -1;
  // The node ID the kernel knows it by: from a counter, never reused, never an address (the
  // kernel shows node IDs to every user, in the handles of name_to_handle_at).
  std::uint64_t id = 0;
  dev_t src_dev = 0;
  ino_t src_ino = 0;
  mode_t type = 0;  // S_IFMT bits of the backing file
  bool is_root = false;

  // --- guarded by the table's mutex ---
  std::uint64_t nlookup = 0;  // the kernel's references
  std::uint64_t refs = 0;     // ours: names of children in this directory, calls under way
  std::vector<InodeName> names;  // the names it is known by (directories: one; the root: none)
  std::uint64_t names_gen = 0;   // bumped on every change of names
  int changing = 0;              // unlink/rename of one of its names under way (NameChange)
  bool detached = false;         // its last name was removed: no longer found by (dev, ino)
  int cached_fd = -1;            // O_PATH descriptor in the cache, or -1
  int fd_pins = 0;               // calls using cached_fd now; it is evicted only at 0
  // Non-directories whose last name our unlink or rename removed: an O_PATH descriptor taken just
  // before, owned until the inode goes. The kernel still uses such an inode: fstat and fchmod of
  // an open fifo, socket or device (whose opens FUSE never sees, so no content descriptor exists),
  // and the cached times it flushes after unlinking a file it wrote.
  int orphan_fd = -1;
  bool orphan_counted = false;  // orphan_fd is one of the table's bounded orphans (NameChange)
  std::list<Inode*>::iterator lru_pos;  // in the table's LRU list while cached and unpinned

  std::mutex mu;  // guards everything below
  // Directories: the IV, read on first use and then kept (it never changes).
  std::optional<DirIv> dir_iv;
  // Directories, where the mount enforces ACLs: the default ACL new entries inherit (empty: none),
  // read on the first create and kept; setting or removing it through the mount updates it.
  // Null until read; behind a pointer, as everything below that few inodes need, since the table
  // holds one Inode per file the kernel knows (a million for a million-file tree).
  std::unique_ptr<std::vector<std::uint8_t>> default_acl;
  // Regular files: whether the backing file holds a security.capability, which every write must
  // remove (with FUSE_HANDLE_KILLPRIV_V2 that is the daemon's job, as file_remove_privs is on
  // ext4). Known for files made by this mount (none) and once the kernel or a write asked; set
  // and cleared by setxattr and removexattr. Atomic: the write path reads it without the lock.
  enum : std::uint8_t { kCapsUnknown, kCapsNone, kCapsPresent };
  std::atomic<std::uint8_t> file_caps{kCapsUnknown};
  // Symlinks with a long target (fs/name_mapping.h): the target as read at the last lookup, with
  // the directory that holds its file. A symlink's target never changes, and readlink and getattr
  // get only the link's own descriptor, not the directory where the target's file is.
  struct LongLink {
    StoredLink link;
    std::string target;
  };
  std::unique_ptr<LongLink> long_link;
  // Regular files while at least one handle is open (or a truncate runs): the one ContentFile
  // shared by all handles, and the descriptors it used (kept open until it goes, since a request
  // may still be using an older one after an upgrade to read-write).
  std::shared_ptr<ContentFile> content;
  int open_count = 0;
  bool content_writable = false;
  std::vector<int> content_fds;
  // Regular files while open: the mtime the kernel's writeback cache last sent (it sends the
  // times it kept after every written file), not yet on the backing file. Written there at the
  // last close, before an fsync, or with the next change of times; a SETATTR of the mtime that
  // follows (tar, cp -p, rsync -t) replaces it, and then one backing call does for both. Every
  // stat through the mount shows it meanwhile.
  std::optional<timespec> pending_mtime;
  // Regular files while open: the backing file's attributes as last seen (create, lookup, getattr,
  // setattr), which answer a SETATTR whose mtime is kept (with the plaintext size and that mtime):
  // a fresh stat there would cost a round trip on a network share, since each write makes the
  // backing filesystem's cached attributes stale. What else could differ (owner, mode, links) only
  // changes through calls that refresh it.
  std::unique_ptr<struct stat> open_attr;
};

// A descriptor of an inode for the length of one call: borrowed (a directory's own descriptor, or
// a cached one pinned against eviction until this goes) or owned (opened for this call). Where no
// descriptor could be had, ok() is false and error() says why (-ESTALE, -ENOENT, -EMFILE, ...).
class PathFd {
 public:
  PathFd() = default;
  PathFd(PathFd&& o) noexcept { *this = std::move(o); }
  PathFd& operator=(PathFd&& o) noexcept;
  PathFd(const PathFd&) = delete;
  ~PathFd() { reset(); }

  bool ok() const { return fd_ >= 0; }
  int get() const { return fd_; }
  int error() const { return err_; }
  // /proc/self/fd/N: for the calls that take only paths (chmod, xattrs, reopening).
  std::string proc_path() const { return "/proc/self/fd/" + std::to_string(fd_); }
  // The file type of a descriptor the table hands out (S_IFREG, S_IFDIR, ...), 0 where unknown:
  // every descriptor it opens by name is checked to be its inode's type as it is opened, and a
  // descriptor's inode never changes, so reopening it needs no fstat to know it is a regular file.
  mode_t known_type() const { return type_; }

 private:
  friend class InodeTable;
  void reset();
  InodeTable* table_ = nullptr;  // set when fd_ is a cached descriptor pinned in pinned_
  Inode* pinned_ = nullptr;
  int fd_ = -1;
  bool owned_ = false;
  int err_ = -EBADF;
  mode_t type_ = 0;
};

class NameChange;

class InodeTable {
 public:
  // Takes ownership of root_fd (an O_PATH or directory descriptor of CIPHERDIR). fd_cache_limit:
  // how many descriptors of non-directories the cache may keep open; dir_cache_limit: of
  // directories.
  InodeTable(int root_fd, std::size_t fd_cache_limit, std::size_t dir_cache_limit);
  InodeTable(int root_fd, DescriptorBudget budget) : InodeTable(root_fd, budget.files, budget.dirs) {}
  InodeTable(const InodeTable&) = delete;
  ~InodeTable();

  Inode& root() { return *root_; }
  // The inode the kernel calls ino. Valid until forgotten; the kernel never uses it after that.
  // An ID the table does not know (a kernel bug) gives a placeholder on which every call fails.
  Inode& get(std::uint64_t ino);
  std::uint64_t id_of(const Inode& inode) const { return inode.id; }
  // How many inodes the table holds (the root included).
  std::size_t size();
  // Whether the inode's last name is gone (removed through our unlink or rename): no name of the
  // backing file is left anywhere.
  bool nameless(Inode& inode);
  std::size_t fd_cache_limit() const { return files_.limit; }
  std::size_t dir_cache_limit() const { return dirs_.limit; }

  // The inode for entry in dir, which fstatat gave st: an existing one or a new one, which
  // remembers this name. Counts one lookup. fd: a directory's O_PATH descriptor, taken over
  // (cached, or closed where one is cached already or the cache is full of descriptors in use);
  // -1 for everything else.
  // handle: the backing file's handle (name_to_handle_at) where the mount exports handles: a file
  // seen before under the same handle gets its old node ID back (see below).
  Inode& find_or_insert(Inode& dir, const std::string& entry, const struct stat& st, int fd,
                        const std::string* handle = nullptr);
  // The same for an inode the table knows already and that needs nothing opened for it (not a
  // directory, or one whose descriptor is cached): counted and named as find_or_insert does. nullptr
  // (nothing changed) otherwise: the caller opens what find_or_insert takes (a directory's
  // descriptor, the backing handle of a new file) and calls that. A lookup of a known name then
  // costs one fstatat.
  Inode* find_known(Inode& dir, const std::string& entry, const struct stat& st);

  // --- File handles that survive (NFS export, open_by_handle_at) ---
  // The kernel's handles name a node ID, which it may have forgotten when the handle comes back:
  // every node ID handed out with a backing handle is remembered for the mount's life (an ID
  // and a handle, about 190 bytes, for up to kMaxRemembered files), a file found again gets the
  // same ID, and a forgotten ID is
  // found again through its backing handle. A new file under a reused inode number has another
  // backing handle, so it gets a new ID and old handles of the removed file stay stale.
  // The live inode of ino, held (see HeldInode), or an empty HeldInode. The kernel sends no
  // request on a node it has forgotten, but a LOOKUP of "." names a node it no longer holds: a
  // FORGET of that node may be on its way through another thread, so the inode is kept alive
  // until the lookup is done with it.
  class HeldInode;
  HeldInode find_id(std::uint64_t ino);
  // The backing handle remembered for a node ID, or nullopt.
  std::optional<std::string> handle_of_id(std::uint64_t ino);
  // The inode of a file reached without a name (by handle, or as a directory's ".."): the live
  // one, counted as looked up (fd is closed), or a new one that keeps fd (O_PATH, taken over) to
  // reach its file until a lookup by name gives it a name, under its remembered ID if any.
  Inode& find_or_insert_unnamed(const struct stat& st, int fd, const std::string& handle);
  // The inode of a file made just now without a name (O_TMPFILE): always a new one, which keeps
  // fd (O_PATH, taken over) to reach its file until a LINK gives it a name. An inode the table
  // still holds under the same (st_dev, st_ino) belongs to a file removed behind our back (this
  // one is new) and is detached. Counts one lookup. handle: as for find_or_insert ("" for none).
  Inode& insert_new_unnamed(const struct stat& st, int fd, const std::string& handle);
  // Drops n lookups; the inode goes when none are left (and no name of a child refers to it).
  void forget(Inode& inode, std::uint64_t n);

  // A descriptor of inode for one call (see PathFd). Failures to find a file again by its names
  // are logged with the ciphertext path.
  PathFd path_fd(Inode& inode);
  // Closes every cached descriptor no call is using (descriptors ran out). Returns how many.
  std::size_t drop_cached_fds();
  // How many descriptors the caches hold now: of other files, of directories.
  std::size_t cached_fds();
  std::size_t cached_dir_fds();

  // The ciphertext path of an inode, for log messages.
  std::string label_of(Inode& inode);

  // Marks the inodes of the entries an unlink or rename is about to change (their stat before
  // the change: a the source or removed entry, b an existing rename target), so that calls that
  // open them meanwhile wait for the change instead of failing. Say what happened through the
  // NameChange once the backing call succeeded.
  NameChange begin_change(const struct stat& a, const struct stat* b);

 private:
  friend class PathFd;
  friend class NameChange;
  using Graveyard = std::vector<std::unique_ptr<Inode>>;
  struct Snapshot;

  // One LRU cache of descriptors: inodes with cached_fd >= 0 number `count`, the unpinned ones
  // are in `lru`, most recently used first.
  struct FdPool {
    explicit FdPool(std::size_t l) : limit(l < 1 ? 1 : l) {}
    const std::size_t limit;
    std::size_t count = 0;
    std::list<Inode*> lru;
  };
  FdPool& pool_of(const Inode& inode) { return S_ISDIR(inode.type) ? dirs_ : files_; }

  void unpin(Inode& inode);
  // Drops the ref a HeldInode took.
  void release(Inode& inode);
  // A descriptor of the root or of an inode with a cached one, pinned (mu_ held).
  PathFd borrow_locked(Inode& inode);
  // Caches fd for inode, pinned (the caller's PathFd) or not. Where every cached descriptor is in
  // use, a pinned request gets fd as its own and an unpinned one closes it (mu_ held).
  PathFd install_locked(Inode& inode, int fd, bool pinned, std::vector<int>& to_close);
  PathFd dir_path_fd(Inode& dir);
  PathFd file_path_fd(Inode& inode);
  void set_dir_name_locked(Inode& dir, Inode& parent, const std::string& entry, Graveyard& dead);
  void add_name_locked(Inode& inode, Inode& dir, const std::string& entry);
  bool remove_name_locked(Inode& inode, const Inode& dir, const std::string& entry, Graveyard& dead);
  void detach_locked(Inode& inode);
  void unref_locked(Inode& inode, Graveyard& dead);
  void maybe_drop_locked(Inode& inode, Graveyard& dead);
  void evict_locked(FdPool& pool, std::size_t keep, std::vector<int>& to_close);
  Inode* find_locked(const struct stat& st);
  // Gives inode its node ID: the one remembered for its backing handle where that ID is free, else
  // a new one, which is then remembered with the handle.
  void index_locked(Inode& inode, const std::string* handle = nullptr);
  void unindex_locked(const Inode& inode);

  // Node ID -> Inode, read by every request: split into shards, each with its own lock, so the
  // request threads rarely meet on one (IDs are consecutive, so they spread evenly). Changed only
  // under mu_ (creation and removal of inodes), read under the shard's lock alone.
  struct alignas(64) IdShard {
    std::mutex mu;
    std::unordered_map<std::uint64_t, Inode*> map;
  };
  static constexpr std::size_t kIdShards = 64;
  std::array<IdShard, kIdShards> ids_;
  std::uint64_t next_id_ = 2;  // 1 is the root (FUSE_ROOT_ID)
  Inode stale_;                // what get() gives for an unknown ID: no descriptor, no name
  struct Remembered {
    std::uint64_t id;
    std::string handle;
  };
  // About 190 bytes a file (measured); at most this many (some 190 MB), then new files are not
  // remembered.
  static constexpr std::size_t kMaxRemembered = 1'000'000;
  // Keyed by the backing file's (st_dev, st_ino). Hashed, not ordered: a lookup of every entry
  // of a large listing walked some twenty levels of a tree here, a cache miss each.
  struct FileKeyHash {
    std::size_t operator()(const std::pair<dev_t, ino_t>& k) const noexcept {
      return std::hash<std::uint64_t>()(static_cast<std::uint64_t>(k.second) * 0x9E3779B97F4A7C15ull ^ k.first);
    }
  };
  std::unordered_map<std::pair<dev_t, ino_t>, Remembered, FileKeyHash> remembered_;  // under mu_
  std::unordered_map<std::uint64_t, std::pair<dev_t, ino_t>> remembered_ids_;  // under mu_

  std::mutex mu_;
  std::condition_variable changed_;  // a NameChange ended
  std::unordered_map<std::pair<dev_t, ino_t>, std::unique_ptr<Inode>, FileKeyHash> inodes_;
  std::unordered_map<Inode*, std::unique_ptr<Inode>> detached_;
  Inode* root_ = nullptr;
  // CIPHERDIR's path as it was at mount, for log messages: read once, not once per label (a
  // readlink of /proc for every created or opened file, whose label its ContentFile keeps).
  std::string root_path_;
  FdPool files_;
  FdPool dirs_;
  // Descriptors kept by inodes whose last name our unlink or rename removed (Inode::orphan_fd),
  // until the kernel forgets them: bounded like the caches (at most files_.limit), since rm -rf
  // removes files faster than their FORGETs arrive. Beyond, a removed file's inode keeps none, and
  // a stat through a handle of it answers ESTALE. Under mu_.
  std::size_t orphans_ = 0;
};

// An inode kept alive (one of its refs) while this lives, whatever the kernel forgets meanwhile.
class InodeTable::HeldInode {
 public:
  HeldInode() = default;
  HeldInode(InodeTable* table, Inode* inode) : table_(table), inode_(inode) {}
  HeldInode(HeldInode&& o) noexcept : table_(o.table_), inode_(o.inode_) { o.inode_ = nullptr; }
  HeldInode& operator=(HeldInode&&) = delete;
  HeldInode(const HeldInode&) = delete;
  ~HeldInode() {
    if (inode_) table_->release(*inode_);
  }
  explicit operator bool() const { return inode_ != nullptr; }
  Inode& operator*() const { return *inode_; }

 private:
  InodeTable* table_ = nullptr;
  Inode* inode_ = nullptr;
};

// See InodeTable::begin_change. Ends (unmarks) when it goes, whether or not the change happened.
class NameChange {
 public:
  NameChange(NameChange&& o) noexcept;
  NameChange(const NameChange&) = delete;
  ~NameChange();

  // Before the backing call: where it removes the last name of a (the removed entry or rename
  // source) or of a replaced target b, open that entry (in dirfd) so the inode stays reachable
  // without a name (Inode::orphan_fd). Kept only if the change happens.
  void hold_a(int dirfd, const std::string& entry) { a_hold_ = hold(a_, a_nlink_, dirfd, entry); }
  void hold_b(int dirfd, const std::string& entry) { b_hold_ = hold(b_, b_nlink_, dirfd, entry); }
  // The same with a descriptor the caller opened (O_PATH) before begin_change, and whose fstat
  // gave begin_change its stat: taken over, kept only where hold_a would have opened one (and
  // then with no second look at what it is).
  void hold_a_opened(int fd);
  // The inode of the removed entry or rename source (a), when the table knows it; it stays alive
  // as long as this NameChange.
  Inode* a() const { return a_; }
  // unlinkat(dir, entry) succeeded: the removed entry (a) lost that name.
  void removed(Inode& dir, const std::string& entry);
  // renameat2(from, src, to, dst, flags) succeeded.
  void renamed(Inode& from, const std::string& src, Inode& to, const std::string& dst, bool exchange);

 private:
  friend class InodeTable;
  explicit NameChange(InodeTable* t) : table_(t) {}
  static int hold(const Inode* in, nlink_t nlink, int dirfd, const std::string& entry);
  // Hands a held descriptor to in as its orphan_fd once its last name is gone (table mutex held).
  void adopt_locked(Inode& in, int& held, bool verified = false);
  InodeTable* table_;
  Inode* a_ = nullptr;
  Inode* b_ = nullptr;
  nlink_t a_nlink_ = 0, b_nlink_ = 0;
  int a_hold_ = -1, b_hold_ = -1;  // from hold_a/hold_b, closed unless adopted
  bool a_hold_verified_ = false;   // a_hold_ is the file a's stat came from (hold_a_opened)
  bool same_ = false;  // a and b are two names of one file: the rename changes nothing
};

// Logs once that descriptors ran out, what holds them and what the user can do.
void warn_out_of_descriptors();

}  // namespace gcfs::mount
