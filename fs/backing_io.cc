#include "fs/backing_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "fs/log.h"
#include "fs/safe_open.h"

namespace gcfs {

std::optional<BackingIoMode> parse_backing_io_mode(std::string_view s) {
  if (s == "auto") return BackingIoMode::Auto;
  if (s == "direct") return BackingIoMode::Direct;
  if (s == "buffered") return BackingIoMode::Buffered;
  return std::nullopt;
}

const char* backing_io_mode_name(BackingIoMode m) {
  switch (m) {
    case BackingIoMode::Auto: return "auto";
    case BackingIoMode::Direct: return "direct";
    case BackingIoMode::Buffered: return "buffered";
  }
  return "?";
}

void BackingIo::fall_back(const std::string& reason) {
  fell_back_.store(true);
  std::call_once(logged_, [&] { log::warning("backing I/O: buffered instead of O_DIRECT: " + reason); });
}

BackingIo::Probe BackingIo::probe(int dirfd, const std::string& name) {
  using Outcome = Probe::Outcome;
  // First without O_DIRECT: what is there at all. Whatever is not the vault's regular file is
  // damage to report, not a sign of the backing filesystem's abilities.
  OpenResult plain = open_beneath(dirfd, name, FileType::Regular, O_RDONLY);
  if (!plain) {
    const int e = plain.error;
    const bool damage = e == ENOENT || e == EUCLEAN || e == ELOOP || e == EXDEV || e == ENOTDIR;
    const std::string what = e == ENOENT ? std::string("missing") : plain.why();
    return damage ? Probe{Outcome::Damaged, what} : Probe{Outcome::Refused, name + ": " + what};
  }
  plain.fd.reset();
  OpenResult o = open_beneath(dirfd, name, FileType::Regular, O_RDONLY | O_DIRECT);
  if (!o) return {Outcome::Refused, "O_DIRECT refused: " + name + " " + o.why()};
  constexpr std::size_t kBlock = 4096;
  void* raw = nullptr;
  if (::posix_memalign(&raw, kBlock, kBlock) != 0) return {Outcome::Refused, "no memory for the O_DIRECT probe"};
  std::unique_ptr<void, decltype(&std::free)> buf(raw, &std::free);
  ssize_t n;
  do n = ::pread(o.fd.get(), buf.get(), kBlock, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0) return {Outcome::Refused, std::string("O_DIRECT read refused: ") + std::strerror(errno)};
  return {};
}

int BackingIo::open_direct(int fd, const FileLabel& label) {
  if (!want_direct()) return -1;
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0) return -1;
  // A new open file description of the same inode (the /proc magic link names the open file
  // itself, not a path that could have changed): O_DIRECT set on it does not touch fd's.
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const int d = ::open(self.c_str(), (fl & O_ACCMODE) | O_DIRECT | O_CLOEXEC);
  if (d >= 0) return d;
  if (errno == EINVAL) fall_back(label.str() + ": the backing filesystem refuses O_DIRECT (" + std::strerror(EINVAL) + ")");
  return -1;
}

}  // namespace gcfs
