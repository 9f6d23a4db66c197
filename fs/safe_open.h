// The one way to reach a file that the vault itself owns in CIPHERDIR: the config, directory IVs,
// long names' .name files, the crash journal, the volume header, fsck's lost+found and its index.
//
// CIPHERDIR often lives where others can write (a sync folder, a shared disk, a restored backup),
// so nothing found there is trusted for its shape:
//   - paths resolve beneath a directory descriptor and never leave it: no "..", no absolute path,
//     no symbolic link followed on the way or at the end (openat2 with RESOLVE_BENEATH |
//     RESOLVE_NO_SYMLINKS where the kernel has it, O_NOFOLLOW per component elsewhere);
//   - nothing is opened for reading or writing before fstat has shown it is of the type its role
//     expects: a FIFO, socket or device node is looked up with O_PATH, which never blocks and never
//     runs a driver's open, and is then reported as damage;
//   - reads of whole files are capped at the size the format allows.
// Every failure is a value (never a hang, never a big read) that says what was found, for the
// caller's "damaged" message.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fs/unique_fd.h"

namespace gcfs {

// What a role expects to find at its path.
enum class FileType { Regular, Directory };

struct OpenResult {
  UniqueFd fd;
  // 0 on success; else the errno of the failure. EUCLEAN: something of another type is there
  // (found_type says what); ELOOP: a symbolic link is on the way or at the end; EXDEV: the path
  // would leave the directory ("..", an absolute path).
  int error = 0;
  mode_t found_type = 0;  // S_IFMT bits of what was found, when error == EUCLEAN or ELOOP

  explicit operator bool() const { return static_cast<bool>(fd); }
  // For messages: "is a FIFO where a regular file belongs", "is a symbolic link (not followed)",
  // "would leave CIPHERDIR", or strerror(error).
  std::string why() const;
};

// Opens relpath beneath dirfd for role `type`. flags: O_RDONLY, O_WRONLY or O_RDWR, optionally
// with O_CREAT (mode is then used; O_EXCL is honoured), O_TRUNC, O_APPEND; O_CLOEXEC is always
// added. A directory is opened O_RDONLY | O_DIRECTORY (flags are ignored for it, except O_PATH
// which returns the O_PATH descriptor itself). The returned descriptor is blocking for regular
// files, as usual.
OpenResult open_beneath(int dirfd, std::string_view relpath, FileType type, int flags, mode_t mode = 0);

// Opens path for I/O, following links as any open does (a name the user gave, a /proc/self/fd
// link), without ever blocking on a FIFO, and keeps the descriptor only when it is a regular file:
// EUCLEAN with found_type otherwise. O_NONBLOCK guards the open alone; the descriptor returned
// blocks as usual. flags as open(2)'s; O_CLOEXEC and O_NOCTTY are always added.
OpenResult open_regular(const std::string& path, int flags);

// Opens for I/O the file an O_PATH descriptor (or any descriptor) holds, through its
// /proc/self/fd link: the inode a descriptor holds never changes, so one fstat of it tells whether
// it is a regular file, and the open that follows reaches that same file, never a FIFO or device
// (EUCLEAN with found_type otherwise, nothing opened). Two calls where open_regular, which must
// expect anything at its path, takes five. flags as open(2)'s; O_CLOEXEC and O_NOCTTY are always
// added. known (optional): an fstat of this same descriptor that the caller took itself (as it
// opened it), whose type then serves instead of a new fstat's: the open alone.
OpenResult reopen_regular(int fd, int flags, const struct stat* known = nullptr);

// A name for a mode's S_IFMT bits: "regular file", "directory", "symbolic link", "FIFO", "socket",
// "character device", "block device".
const char* file_type_name(mode_t mode);

// Reads all of fd (a regular file) from offset 0 into *out when it holds at most max_bytes;
// -EFBIG when it holds more (nothing is read then), -errno on a read error, else 0.
int read_capped(int fd, std::size_t max_bytes, std::vector<std::uint8_t>* out);

// True when relpath is a plain relative path: not empty, not absolute, no "." or ".." component,
// no empty component. What journal hints and repair targets must be before they are resolved.
bool is_plain_relative_path(std::string_view relpath);

}  // namespace gcfs
