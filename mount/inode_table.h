// The daemon's inodes, keyed like passthrough_hp's by the backing file's (st_dev, st_ino): every
// name of a hard-linked file maps to one Inode, so all its handles share one ContentFile and its
// chunk locks. An Inode holds an O_PATH descriptor of the ciphertext file; every operation works
// relative to such descriptors (*at calls), never by path, so renames underneath stay harmless.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "crypto/name_cipher.h"
#include "fs/content_file.h"

namespace gcfs::mount {

struct Inode {
  Inode() = default;
  Inode(const Inode&) = delete;
  ~Inode();

  int fd = -1;  // O_PATH, owned
  dev_t src_dev = 0;
  ino_t src_ino = 0;
  mode_t type = 0;        // S_IFMT bits of the backing file
  std::uint64_t nlookup = 0;  // guarded by the table's mutex
  bool is_root = false;

  std::mutex mu;  // guards everything below
  // Directories: the IV, read on first use and then kept (it never changes).
  std::optional<DirIv> dir_iv;
  // Regular files while at least one handle is open (or a truncate runs): the one ContentFile
  // shared by all handles, and the descriptors it used (kept open until it goes, since a request
  // may still be using an older one after an upgrade to read-write).
  std::shared_ptr<ContentFile> content;
  int open_count = 0;
  bool content_writable = false;
  std::vector<int> content_fds;
  // Serializes appends: finding the end and writing there must be one step.
  std::mutex append_mu;
};

class InodeTable {
 public:
  // Takes ownership of root_fd (an O_PATH or directory descriptor of CIPHERDIR).
  explicit InodeTable(int root_fd);
  InodeTable(const InodeTable&) = delete;

  Inode& root() { return *root_; }
  // The inode the kernel calls ino. Valid until forgotten; the kernel never uses it after that.
  Inode& get(std::uint64_t ino);
  std::uint64_t id_of(const Inode& inode) const;

  // The inode for an entry whose O_PATH fd and stat the caller has: an existing one (fd is closed)
  // or a new one owning fd. Counts one lookup.
  Inode& find_or_insert(int fd, const struct stat& st);
  // Drops n lookups; the inode goes when none are left.
  void forget(Inode& inode, std::uint64_t n);

 private:
  std::mutex mu_;
  std::map<std::pair<dev_t, ino_t>, std::unique_ptr<Inode>> inodes_;
  Inode* root_ = nullptr;
};

}  // namespace gcfs::mount
