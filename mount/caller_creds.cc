#include "mount/caller_creds.h"

#include <linux/capability.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace gcfs::mount {
namespace {

// The effective capability set of a thread: the "CapEff:" line of /proc/TID/status.
std::uint64_t effective_capabilities(pid_t pid) {
  if (pid <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("CapEff:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 16);
  return 0;
}

}  // namespace

CallerCreds caller_creds(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  CallerCreds c;
  c.uid = ctx->uid;
  c.gid = ctx->gid;
  gid_t groups[256];
  int n = fuse_req_getgroups(req, 256, groups);
  if (n > 256) {
    c.groups.resize(static_cast<std::size_t>(n));
    n = fuse_req_getgroups(req, n, c.groups.data());
    if (n < 0) c.groups.clear();
  } else if (n > 0) {
    c.groups.assign(groups, groups + n);
  }
  const std::uint64_t caps = effective_capabilities(ctx->pid);
  c.cap_fsetid = (caps >> CAP_FSETID) & 1;
  c.cap_sys_admin = (caps >> CAP_SYS_ADMIN) & 1;
  return c;
}

}  // namespace gcfs::mount
