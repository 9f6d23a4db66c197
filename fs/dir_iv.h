// The per-directory IV file, gpucryptfs.diriv: 16 random bytes that every name in the directory
// is encrypted with as associated data. Written once when the directory is created, never changed.
#pragma once

#include "crypto/name_cipher.h"
#include "fs/file_label.h"

namespace gcfs {

constexpr const char* kDirIvFileName = "gpucryptfs.diriv";
// Where a new IV is written before its rename; one left by a crash is ours to remove.
constexpr const char* kDirIvTempName = "gpucryptfs.diriv.tmp";

// Reads dirfd's IV into *iv. Returns 0 or -errno. Anything but a regular file of exactly 16 bytes
// (missing, a FIFO, socket, device, directory or symbolic link, a file of another size) is -EIO,
// logged naming `label`, the directory's ciphertext path (made only then), and what was found; it never blocks,
// never follows a link and never reads more than the IV's size (fs/safe_open.h).
int read_dir_iv(int dirfd, DirIv* iv, const FileLabel& label);
// Creates dirfd's IV file with fresh random bytes (mode 0440), or with *given when set (putting
// back the IV of a directory whose rmdir failed). Returns 0 or -errno; never leaves a torn file.
// The file is fsynced before its rename; the rename reaches the disk with sync_directory(dirfd).
int create_dir_iv(int dirfd, DirIv* out, const DirIv* given = nullptr);
// fsync of the directory dirfd (opened for reading): its entries, the IV's name among them, and
// its own attributes are durable. Returns 0 or -errno; a filesystem that refuses fsync on
// directories (EINVAL, EOPNOTSUPP) counts as done, since there is nothing more to ask of it.
int sync_directory(int dirfd);

}  // namespace gcfs
