// The credentials of the process behind a request, for the setid rules (caller_creds.h).
#include "mount/daemon/caller_creds.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <linux/capability.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fs/unique_fd.h"

namespace gcfs::mount {
namespace {

// The whole of /proc/TID/status (about 1.5 KiB), or "" when the thread is gone. Read here rather
// than through libfuse's fuse_req_getgroups, which in 3.14 runs strstr over a buffer it never
// terminates (AddressSanitizer reports the read past its end), and which would read the same
// file a second time for the capabilities.
std::string read_status(pid_t tid) {
  std::string out;
  if (tid <= 0) return out;
  const std::string path = "/proc/" + std::to_string(tid) + "/status";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > (1u << 16)) break;  // no status file is this long; stop rather than grow
  }
  return out;
}

// The value of "Name:\t..." in a status file, or an empty view.
std::string_view field(std::string_view status, std::string_view name) {
  std::size_t pos = 0;
  while (pos < status.size()) {
    const std::size_t end = std::min(status.find('\n', pos), status.size());
    const std::string_view line = status.substr(pos, end - pos);
    if (line.size() > name.size() && line.substr(0, name.size()) == name && line[name.size()] == ':')
      return line.substr(name.size() + 1);
    pos = end + 1;
  }
  return {};
}

std::vector<gid_t> parse_groups(std::string_view list) {
  std::vector<gid_t> groups;
  std::size_t i = 0;
  while (i < list.size()) {
    while (i < list.size() && (list[i] == ' ' || list[i] == '\t')) ++i;
    std::uint64_t v = 0;
    bool digits = false;
    while (i < list.size() && list[i] >= '0' && list[i] <= '9') {
      v = v * 10 + static_cast<std::uint64_t>(list[i] - '0');
      digits = true;
      ++i;
    }
    if (!digits) break;
    groups.push_back(static_cast<gid_t>(v));
  }
  return groups;
}

// A capability counts only in the daemon's own user namespace (on a host, the initial one): a
// user who made a namespace of his own (unshare -U -r) holds every capability there, and none
// over the files this daemon serves. The namespace is told by the inode of /proc/TID/ns/user, as
// the kernel's capable() tells it by the namespace itself; a thread that is gone counts as not
// in it.
bool in_daemon_user_namespace(pid_t tid) {
  static const struct stat mine = [] {
    struct stat st {};
    if (::stat("/proc/self/ns/user", &st) != 0) st.st_ino = 0;
    return st;
  }();
  if (tid <= 0 || mine.st_ino == 0) return false;
  struct stat st {};
  const std::string path = "/proc/" + std::to_string(tid) + "/ns/user";
  return ::stat(path.c_str(), &st) == 0 && st.st_dev == mine.st_dev && st.st_ino == mine.st_ino;
}

}  // namespace

CallerCreds caller_creds(fuse_req_t req, KernelSays kernel) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  CallerCreds c;
  c.uid = ctx->uid;
  c.gid = ctx->gid;
  const std::string status = read_status(ctx->pid);
  c.groups = parse_groups(field(status, "Groups"));
  const std::string caps_hex(field(status, "CapEff"));
  std::uint64_t caps = caps_hex.empty() ? 0 : std::strtoull(caps_hex.c_str(), nullptr, 16);
  if (caps && !in_daemon_user_namespace(ctx->pid)) caps = 0;
  c.cap_fsetid = (caps >> CAP_FSETID) & 1;
  c.cap_sys_admin = (caps >> CAP_SYS_ADMIN) & 1;
  // The kernel judged CAP_FSETID itself, in the right namespace and at the time of the call:
  // when it asks for the bits to go, they go, whatever /proc says now.
  if (kernel == KernelSays::KillSetid) c.cap_fsetid = false;
  return c;
}

}  // namespace gcfs::mount
