// The descriptors of a depth-first walk down CIPHERDIR (fsck): any depth, a bounded number of
// open descriptors, never a link followed, never a path resolved again.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "fs/safe_open.h"
#include "fs/unique_fd.h"

namespace gcfs {

// The directories from CIPHERDIR down to the one being read, for a walk without recursion. Each
// level is opened beneath its parent's descriptor with open_beneath (a real directory, never a
// link), so the walk never leaves CIPHERDIR. Only CIPHERDIR and the kHeldLevels deepest levels
// keep a descriptor; going back up to a level whose descriptor was closed opens ".." of the
// level below and accepts it only when it is the very directory (device and inode) the walk came
// down through. When it is not (the tree was moved about meanwhile) the level is lost: top()
// is -1 until the walk is back at a level that kept its descriptor.
class DirChain {
 public:
  // Descriptors kept open besides the root's: the deepest levels.
  static constexpr std::size_t kHeldLevels = 64;

  explicit DirChain(UniqueFd root) {
    struct stat st {};
    ::fstat(root.get(), &st);
    levels_.push_back({std::move(root), st.st_dev, st.st_ino});
  }
  std::size_t depth() const { return levels_.size() - 1; }
  int root() const { return levels_.front().fd.get(); }
  int top() const { return levels_.back().fd.get(); }

  // Makes the directory `name` beneath top() the new top; on failure nothing changes and the
  // result says why (a link, another type, gone).
  OpenResult descend(const std::string& name) {
    OpenResult r = open_beneath(top(), name, FileType::Directory, O_RDONLY);
    if (!r) return r;
    struct stat st {};
    if (::fstat(r.fd.get(), &st) != 0) {
      r.error = errno;
      r.fd.reset();
      return r;
    }
    levels_.push_back({std::move(r.fd), st.st_dev, st.st_ino});
    if (levels_.size() > kHeldLevels + 1) levels_[levels_.size() - 1 - kHeldLevels].fd.reset();
    return r;
  }

  // Back to the parent (depth() > 0). Afterwards top() is -1 when the parent is lost.
  void ascend() {
    Level child = std::move(levels_.back());
    levels_.pop_back();
    Level& parent = levels_.back();
    if (parent.fd || !child.fd) return;
    UniqueFd up(::openat(child.fd.get(), "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (up && ::fstat(up.get(), &st) == 0 && st.st_dev == parent.dev && st.st_ino == parent.ino)
      parent.fd = std::move(up);
  }

 private:
  struct Level {
    UniqueFd fd;
    dev_t dev;
    ino_t ino;
  };
  std::vector<Level> levels_;
};

}  // namespace gcfs
