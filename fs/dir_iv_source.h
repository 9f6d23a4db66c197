// Where a directory's name IV comes from: the one question every reader and writer of names asks
// (docs/FORMAT.md, "Directory IVs"). A vault made with `init --deterministic-names` has no
// per-directory IV files: every directory's names are encrypted with the constant all-zero IV, so
// equal names in different directories have equal encrypted names (docs/SECURITY.md says what that
// gives away) and no gpucryptfs.diriv exists for a sync client to conflict on. Every other vault
// keeps one gpucryptfs.diriv per directory (fs/dir_iv.h). The answer is a flag fixed at open: the
// per-directory path costs one branch more than calling read_dir_iv itself, no syscall, no lock.
#pragma once

#include "fs/dir_iv.h"

namespace gcfs {

class DirIvSource {
 public:
  explicit DirIvSource(bool deterministic = false) : deterministic_(deterministic) {}

  // Whether names use the constant IV (no gpucryptfs.diriv anywhere in CIPHERDIR).
  bool deterministic() const { return deterministic_; }

  // dirfd's name IV: the constant IV without looking at the disk, or read_dir_iv's (0 or -errno,
  // a missing or damaged file logged naming `label`).
  int read(int dirfd, DirIv* iv, const FileLabel& label) const {
    if (deterministic_) {
      *iv = DirIv{};
      return 0;
    }
    return read_dir_iv(dirfd, iv, label);
  }
  // A new directory's IV (mkdir, init's root), or one put back (*given): the constant IV and
  // nothing written, or create_dir_iv's file. 0 or -errno; *out (optional) gets the IV.
  int create(int dirfd, DirIv* out, const DirIv* given = nullptr) const {
    if (deterministic_) {
      if (out) *out = DirIv{};
      return 0;
    }
    return create_dir_iv(dirfd, out, given);
  }

 private:
  bool deterministic_;
};

}  // namespace gcfs
