// The directory vault's re-key walk (docs/FORMAT.md, "Re-keying"): every entry of CIPHERDIR
// moved from the old keys to the new, each step safe to be killed at and done again.
//
// Every backing entry tells which key it is under (its name decrypts under the new names key or
// the old, AES-SIV authenticating), so the walk needs no list of what it did: a resumed walk does
// what is left. Per entry, in an order that never loses anything:
//   - a regular file: its plaintext copied under the new keys into a temporary file beside it
//     (gcfs.rekey.*.tmp, owner, mode, times and attributes kept), synced, renamed to its new
//     name, then the old name removed. An old name whose new name exists is the finished copy's
//     twin and is removed. A batch of files shares one syncfs and one directory fsync.
//   - hard links: all names of one inode get one new inode (found by (dev, ino) in a first pass,
//     re-keyed before the walk while no directory has moved): one copy, then a link for every other name, then the old names removed; a resumed walk
//     finds the copy by its new name and links the rest to it, so links are never split.
//   - a symlink: a new one made, renamed over its new name, the old removed.
//   - a directory: its contents first (subdirectories on several threads, hooks.walkers), its
//     attributes re-encrypted in place, then renamed; its IV
//     file stays (an IV is public, and names under it are encrypted with the new key).
//   - a FIFO, socket or device: its attributes in place, then renamed.
//   - long names: the new .name sibling written and synced before its entry.
// Nothing is followed and nothing outside CIPHERDIR is touched: every call is relative to a
// directory descriptor opened with O_NOFOLLOW, one name at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "fs/rekey/entry_copy.h"
#include "fs/unique_fd.h"

namespace gcfs {

struct DirRekeyStats {
  std::uint64_t files = 0, directories = 0, symlinks = 0, others = 0, hard_link_groups = 0;
  std::uint64_t bytes = 0;
  std::uint64_t twins_removed = 0;  // old names left by a re-key killed after their copy was in place
  std::uint64_t foreign = 0;        // entries under neither key: left as they are (fsck reports them)
};

struct DirRekeyHooks {
  std::function<void(std::uint64_t bytes, std::uint64_t files)> progress;  // as work is done
  std::function<void(const CopyTimes&)> times;                             // after each file
  int threads = 4;  // files copied at once within a directory's batch
  // Directories walked at once. A tree of small files is bound by the per-entry system calls and
  // name ciphers of its directories, which one walking thread does one after another.
  int walkers = 1;
  int file_parts = 2;  // ranges of one large file copied at once
};

// Counts what is still under the old key (bytes and regular files), for the progress line.
struct RekeyTotals {
  std::uint64_t bytes = 0, files = 0;
};

// A test hook: with GPUCRYPTFS_REKEY_TEST_STOP_AFTER=N in the environment, the process kills
// itself (SIGKILL) after its Nth durable change, so tests can stop a re-key dead anywhere.
void rekey_step();

class DirRekey {
 public:
  DirRekey(int root_fd, const RekeyPair& keys, DirRekeyHooks hooks);
  ~DirRekey();
  // The first pass: totals and the hard-link groups.
  RekeyTotals scan();
  // The walk. Throws UserError naming the entry when one cannot be re-keyed (nothing is lost: run
  // again after fixing the cause).
  DirRekeyStats run();

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace gcfs
