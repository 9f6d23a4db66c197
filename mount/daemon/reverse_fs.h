// Reverse mode's FUSE side: a read-only filesystem showing fs/reverse_view.h's ciphertext view of
// PLAINDIR. Its own operation table (nothing is ever written); node IDs name (directory, entry)
// pairs of the view and are forgotten when the kernel forgets them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "fs/reverse_view.h"
#include "mount/fuse_api.h"

namespace gcfs::mount {

class ReverseFs {
 public:
  explicit ReverseFs(ReverseView& view) : view_(view) {}
  static const fuse_lowlevel_ops& operations();

  void init(fuse_conn_info* conn);
  void lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  void forget(fuse_ino_t ino, std::uint64_t n);
  void getattr(fuse_req_t req, fuse_ino_t ino);
  void readlink(fuse_req_t req, fuse_ino_t ino);
  void open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void read(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi);
  void release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void readdir(fuse_req_t req, fuse_ino_t ino, std::size_t size, off_t off, fuse_file_info* fi);
  void releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  void statfs(fuse_req_t req, fuse_ino_t ino);

 private:
  struct Node {
    std::string dir;     // the plaintext directory holding it ("" for PLAINDIR)
    ReverseEntry entry;  // the root: a Plain entry with an empty name
    std::uint64_t nlookup = 0;
    // What the path named when the kernel looked it up (the plaintext entry's, or for a file of
    // the view alone its directory's): every later use by path must find the same. A user who
    // owns a folder in PLAINDIR could otherwise put another user's folder in its place between
    // the lookup, whose attributes the kernel's permission check trusts, and the open.
    // Not kept for the root (PLAINDIR is held open).
    bool has_identity = false;
    dev_t dev = 0;
    ino_t ino = 0;
    bool same_as(const struct stat& st) const { return !has_identity || (st.st_dev == dev && st.st_ino == ino); }
    std::string path() const { return ReverseView::join(dir, entry.plain_name); }
  };
  // A copy of node ino, or nullptr when the kernel names a node it forgot.
  std::shared_ptr<const Node> node(fuse_ino_t ino);
  // The node for entry e of dir whose lookup found attributes st: the one it had, or a new one
  // when the name now stands for another file (as a new inode would).
  fuse_ino_t remember(const std::string& dir, const ReverseEntry& e, const struct stat& st);

  ReverseView& view_;
  std::mutex mu_;
  std::uint64_t next_ = FUSE_ROOT_ID + 1;
  std::unordered_map<fuse_ino_t, std::shared_ptr<Node>> nodes_;
  std::map<std::pair<std::string, std::string>, fuse_ino_t> by_name_;
};

}  // namespace gcfs::mount
