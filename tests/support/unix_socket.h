// Planting a bound Unix socket where a test wants one (a socket is one of the shapes a hostile
// CIPHERDIR can hold where the vault expects its own file).
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace gcfs::test {

// A bound Unix socket at dir/name, bound by a relative name from inside dir: sun_path holds only
// 108 bytes, less than a deep TMPDIR needs. Returns whether it was made.
inline bool make_socket(const std::string& dir, const char* name) {
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  const int cwd = ::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  bool ok = s >= 0 && cwd >= 0 && ::chdir(dir.c_str()) == 0;
  if (ok) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, name, sizeof addr.sun_path - 1);
    ok = ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  if (cwd >= 0 && ::fchdir(cwd) != 0) ok = false;
  if (cwd >= 0) ::close(cwd);
  if (s >= 0) ::close(s);
  return ok;
}

}  // namespace gcfs::test
