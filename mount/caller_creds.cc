#include "mount/caller_creds.h"

#include <fcntl.h>
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

}  // namespace

CallerCreds caller_creds(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  CallerCreds c;
  c.uid = ctx->uid;
  c.gid = ctx->gid;
  const std::string status = read_status(ctx->pid);
  c.groups = parse_groups(field(status, "Groups"));
  const std::string caps_hex(field(status, "CapEff"));
  const std::uint64_t caps = caps_hex.empty() ? 0 : std::strtoull(caps_hex.c_str(), nullptr, 16);
  c.cap_fsetid = (caps >> CAP_FSETID) & 1;
  c.cap_sys_admin = (caps >> CAP_SYS_ADMIN) & 1;
  return c;
}

}  // namespace gcfs::mount
