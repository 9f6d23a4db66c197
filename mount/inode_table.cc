#include "mount/inode_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "mount/fuse_api.h"

namespace gcfs::mount {

Inode::~Inode() {
  content.reset();
  for (int f : content_fds) ::close(f);
  if (fd >= 0) ::close(fd);
}

InodeTable::InodeTable(int root_fd) {
  struct stat st {};
  if (::fstat(root_fd, &st) != 0) throw std::runtime_error(std::string("fstat of CIPHERDIR: ") + std::strerror(errno));
  auto root = std::make_unique<Inode>();
  root->fd = root_fd;
  root->src_dev = st.st_dev;
  root->src_ino = st.st_ino;
  root->type = S_IFDIR;
  root->is_root = true;
  root->nlookup = 2;
  root_ = root.get();
  inodes_[{st.st_dev, st.st_ino}] = std::move(root);
}

Inode& InodeTable::get(std::uint64_t ino) {
  if (ino == FUSE_ROOT_ID) return *root_;
  return *reinterpret_cast<Inode*>(ino);
}

std::uint64_t InodeTable::id_of(const Inode& inode) const {
  if (&inode == root_) return FUSE_ROOT_ID;
  return reinterpret_cast<std::uint64_t>(&inode);
}

Inode& InodeTable::find_or_insert(int fd, const struct stat& st) {
  std::lock_guard lk(mu_);
  auto it = inodes_.find({st.st_dev, st.st_ino});
  if (it != inodes_.end()) {
    ::close(fd);
    ++it->second->nlookup;
    return *it->second;
  }
  auto inode = std::make_unique<Inode>();
  inode->fd = fd;
  inode->src_dev = st.st_dev;
  inode->src_ino = st.st_ino;
  inode->type = st.st_mode & S_IFMT;
  inode->nlookup = 1;
  Inode& ref = *inode;
  inodes_[{st.st_dev, st.st_ino}] = std::move(inode);
  return ref;
}

void InodeTable::forget(Inode& inode, std::uint64_t n) {
  std::unique_ptr<Inode> dead;  // destroyed outside the lock
  std::lock_guard lk(mu_);
  if (inode.is_root) return;
  inode.nlookup = n >= inode.nlookup ? 0 : inode.nlookup - n;
  if (inode.nlookup == 0) {
    auto it = inodes_.find({inode.src_dev, inode.src_ino});
    if (it != inodes_.end() && it->second.get() == &inode) {
      dead = std::move(it->second);
      inodes_.erase(it);
    }
  }
}

}  // namespace gcfs::mount
