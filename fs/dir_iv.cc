#include "fs/dir_iv.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "crypto/random.h"
#include "fs/plain_io.h"
#include "fs/log.h"
#include "fs/safe_open.h"

namespace gcfs {
namespace {

// Errors that say nothing about what lies in CIPHERDIR (the daemon is short of descriptors or
// memory, or may not read there): passed on as they are. Everything else is damage.
bool is_resource_error(int e) { return e == EMFILE || e == ENFILE || e == ENOMEM || e == EACCES || e == EPERM || e == EINTR; }

}  // namespace

int read_dir_iv(int dirfd, DirIv* iv, const FileLabel& label) {
  const auto where = [&] { return label.str() + "/" + kDirIvFileName; };
  // Never blocks (a FIFO, a device), never follows a link, never reads more than the IV's size.
  OpenResult r = open_beneath(dirfd, kDirIvFileName, FileType::Regular, O_RDONLY);
  if (!r) {
    log::error(where() + ": cannot open the directory IV: " + (r.error == ENOENT ? std::string("missing") : r.why()) +
               " (damaged: names in this directory cannot be read or written)");
    return is_resource_error(r.error) ? -r.error : -EIO;
  }
  std::vector<std::uint8_t> buf;
  int rc = read_capped(r.fd.get(), kDirIvBytes, &buf);
  if (rc == 0 && buf.size() == kDirIvBytes) {
    std::copy(buf.begin(), buf.end(), iv->begin());
    return 0;
  }
  if (rc == 0 || rc == -EFBIG) {
    struct stat st {};
    const long long size = rc == 0 ? static_cast<long long>(buf.size())
                                   : (::fstat(r.fd.get(), &st) == 0 ? static_cast<long long>(st.st_size) : -1);
    log::error(where() + ": directory IV has " + std::to_string(size) + " bytes, not " + std::to_string(kDirIvBytes) +
               " (damaged: names in this directory cannot be read or written)");
    return -EIO;
  }
  log::error(where() + ": cannot read the directory IV: " + std::strerror(-rc));
  return is_resource_error(-rc) ? rc : -EIO;
}

int create_dir_iv(int dirfd, DirIv* out, const DirIv* given) {
  DirIv iv{};
  if (given) iv = *given;
  else random_bytes(iv);
  // A temporary name and a rename: a crash never leaves a short IV file behind. O_EXCL: whatever
  // sits at the temporary name (a crash's leftover, or not ours to open) is never written into; it
  // is removed and the create tried once more. Not removed up front: in a new directory (mkdir)
  // there is nothing, and a look would be one more round trip on a network share.
  const std::string tmp = kDirIvTempName;
  OpenResult r = open_beneath(dirfd, tmp, FileType::Regular, O_WRONLY | O_CREAT | O_EXCL, 0440);
  if (!r && (r.error == EEXIST || r.error == ELOOP || (r.error == EUCLEAN && !S_ISDIR(r.found_type)))) {
    ::unlinkat(dirfd, tmp.c_str(), 0);
    r = open_beneath(dirfd, tmp, FileType::Regular, O_WRONLY | O_CREAT | O_EXCL, 0440);
  }
  if (!r) return r.error == EUCLEAN || r.error == ELOOP ? -EEXIST : -r.error;
  ssize_t n = pwrite_full(r.fd.get(), iv.data(), iv.size(), 0);
  int rc = n < 0 ? static_cast<int>(n) : 0;
  if (rc == 0 && ::fsync(r.fd.get()) != 0) rc = -errno;
  r.fd.reset();
  if (rc == 0 && ::renameat(dirfd, tmp.c_str(), dirfd, kDirIvFileName) != 0) rc = -errno;
  if (rc != 0) {
    ::unlinkat(dirfd, tmp.c_str(), 0);
    return rc;
  }
  if (out) *out = iv;
  return 0;
}

int sync_directory(int dirfd) {
  if (::fsync(dirfd) == 0) return 0;
  return errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS ? 0 : -errno;
}

}  // namespace gcfs
