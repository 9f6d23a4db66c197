// fsck for directory vaults: reads everything gpucryptfs wrote into a CIPHERDIR (directory IVs,
// names, long-name files, file headers, every chunk's tag, symlink targets, extended attributes)
// and lists what does not authenticate, with the ciphertext path always and the plaintext path
// where the names on the way decrypt. No FUSE here; `gpucryptfs fsck` is the CLI around it. Its
// steps, one file each, are listed in checker.h; a volume's check is volume_check.h.
//
// It changes nothing unless asked to repair, and repairing only ever moves items that cannot be
// read at all into CIPHERDIR/gpucryptfs.lost+found/ (FORMAT.md): it never deletes and never
// rewrites ciphertext, except that it puts back a chunk that fails authentication from an
// authentic pre-image in the crash journal (chunk_journal.h), which restores, never destroys.
//
// Nothing found in CIPHERDIR is trusted for its shape (fs/safe_open.h): every file and directory
// is reached beneath CIPHERDIR's descriptor without following a link, a FIFO or device node is
// never opened, the walk is iterative (any depth, a bounded number of descriptors), and a move is
// a renameat between descriptors held from the check, of the very inode the check saw, into a
// lost+found that is a real directory of CIPHERDIR (a link there makes --repair move nothing).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"
#include "fs/vault.h"

namespace gcfs {

constexpr const char* kLostFoundDirName = "gpucryptfs.lost+found";
constexpr const char* kLostFoundIndexName = "index.txt";

struct FsckProblem {
  std::string cipher_path;  // relative to CIPHERDIR; always set
  std::string plain_path;   // "/a/b" in the plaintext view; empty when a name on the way does not decrypt
  std::string what;         // what is wrong, in words
  // True when nothing of the item can be read through a mount (a name that does not decrypt, a
  // file whose header or size is damaged, a symlink whose target does not decrypt): --repair
  // moves such items aside. A file with some damaged chunks stays where it is, because its other
  // chunks still read.
  bool unreadable = false;
  std::string moved_to;     // set when --repair moved it: path relative to CIPHERDIR
};

struct FsckProgress {
  // Ciphertext bytes of regular files that hold data: holes are skipped, not read, so they are
  // not counted (a 1 TiB sparse file with 100 bytes written counts a few KiB). done_bytes may pass
  // total_bytes by the rounding of partly allocated chunks.
  std::uint64_t done_bytes = 0, total_bytes = 0;
  std::uint64_t done_entries = 0, total_entries = 0;
};

struct FsckOptions {
  bool repair = false;
  // --repair: a descriptor of the crash journal on which the caller holds the vault's exclusive
  // lock for the whole run (what a read-write mount holds); restoring torn chunks uses it. -1:
  // the check tries to take the lock itself when it has chunks to restore.
  int journal_lock_fd = -1;
  // Called now and then from the checking thread.
  std::function<void(const FsckProgress&)> progress;
  // --repair: called just before each item is moved, with its ciphertext path. Tests use it to
  // change CIPHERDIR between the check and the move.
  std::function<void(const std::string& cipher_path)> before_move;
};

struct FsckReport {
  std::vector<FsckProblem> problems;
  std::uint64_t directories = 0, files = 0, symlinks = 0, others = 0;
  std::uint64_t chunks = 0, holes = 0, xattrs = 0;
  std::uint64_t bytes = 0;  // ciphertext bytes of regular files read
  // --repair: one line per chunk put back from the crash journal ("restored chunk K of PATH ...").
  std::vector<std::string> restored;
  // Why --repair moves nothing, e.g. "gpucryptfs.lost+found is a FIFO, ...": lost+found or its
  // index is not a real directory / regular file of CIPHERDIR. Also reported as a problem.
  std::string repair_refused;
  bool clean() const { return problems.empty(); }
};

// Walks vault's CIPHERDIR. Throws UserError only when the check cannot run at all (CIPHERDIR
// unreadable); everything else is a problem in the report. Thread-compatible, not thread-safe.
FsckReport check_vault(const Vault& vault, ChunkEngine& engine, const FsckOptions& options = {});

}  // namespace gcfs
