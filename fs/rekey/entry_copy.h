// The pieces of a re-key that touch one backing entry (fs/rekey/dir_rekey.h walks the tree and
// decides the order): a regular file's plaintext copied into a new file under the new keys, a
// symlink made again with its target under the new key, and the encrypted extended attributes
// re-encrypted, each self-identifying (its name decrypts under the new key or the old).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "crypto/chunk_engine.h"
#include "fs/vault.h"

namespace gcfs {

struct RekeyPair {
  const Vault& old_v;
  const Vault& new_v;
  ChunkEngine& engine;  // the cipher for both (a TimedEngine around the --engine choice)
};

struct CopyTimes {
  double read_s = 0, write_s = 0;  // wall time of the reads and writes, cipher included
};

// Copies the plaintext of old_fd (a content file under the old keys) into new_fd (empty, made just
// now) under the new keys, in batches of many chunks, the next batch read while one is written.
// All-zero chunks become holes. Returns the plaintext bytes copied, or -errno (logged, naming
// label). A large file is copied as `parts` ranges at once.
std::int64_t copy_content(const RekeyPair& k, int old_fd, int new_fd, const std::string& label, CopyTimes* times,
                          int parts = 2);

// Where an entry's extended attributes are reached: an open descriptor (a file, a directory) or a
// path through /proc/self/fd of its directory that is not followed at the end (a symlink, a FIFO).
struct XattrPlace {
  int fd = -1;
  std::string path;
  static XattrPlace of_fd(int fd) { return {fd, ""}; }
  static XattrPlace in_dir(int dirfd, const std::string& name) {
    return {-1, "/proc/self/fd/" + std::to_string(dirfd) + "/" + name};
  }
};

// Copies from's encrypted attributes to `to`, re-encrypted under the new keys (special: `to` is
// neither a regular file nor a directory: trusted.gcfs.* names). 0 or -errno.
int copy_xattrs(const RekeyPair& k, const XattrPlace& from, const XattrPlace& to, bool special);
// Re-encrypts at's attributes in place: each one under the old key gets its new name and value
// set, then the old one removed; one already under the new key is left. `step` runs after each
// change (the test hook that stops a re-key dead). 0 or -errno.
int rekey_xattrs_in_place(const RekeyPair& k, const XattrPlace& at, bool special, void (*step)());

// Owner, mode and times of st onto fd (a new regular file), in the order that keeps them all
// (chown clears set-id bits, so the mode goes after it; the times last). 0 or -errno.
int copy_file_attributes(int fd, const struct stat& st);

}  // namespace gcfs
