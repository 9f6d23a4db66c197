// Space a root daemon allocates charged to the caller it is for (caller_charge.h).
#include "mount/daemon/caller_charge.h"

#include <linux/capability.h>
#include <linux/fuse.h>
#include <linux/magic.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "fs/log.h"

namespace gcfs::mount {
namespace {

std::atomic<bool> g_on{false};
// The daemon's own capabilities, as it started, and the same without CAP_SYS_RESOURCE.
__user_cap_data_struct g_full[2]{}, g_charged[2]{};

int set_caps(__user_cap_data_struct* data) {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  return static_cast<int>(::syscall(SYS_capset, &h, data));
}

// Filesystems whose server checks each call's filesystem uid itself.
const char* network_kind(long type) {
  switch (static_cast<unsigned long>(type)) {
    case NFS_SUPER_MAGIC: return "NFS";
    case SMB_SUPER_MAGIC:
    case 0xFF534D42UL:  // CIFS
    case 0xFE534D42UL:  // SMB2
      return "SMB";
    case 0x65735546UL: return "FUSE";
    case 0x00C36400UL: return "CephFS";
    case AFS_SUPER_MAGIC:
    case 0x6B414653UL:  // kAFS
      return "AFS";
    case V9FS_MAGIC: return "9P";
    case CODA_SUPER_MAGIC: return "Coda";
    case 0x0BD00BD0UL: return "Lustre";
    case 0x01161970UL: return "GFS2";
    case 0x7461636FUL: return "OCFS2";
    default: return nullptr;
  }
}

void warn_once(const char* what) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    log::warning(std::string("cannot charge space to its caller (") + what + "): " + std::strerror(errno));
}

}  // namespace

std::string enable_caller_charging(int cipherdir_fd) {
  if (::geteuid() != 0) return "the daemon is not root: its writes are charged to its own user";
  struct statfs sf {};
  if (::fstatfs(cipherdir_fd, &sf) != 0) return std::string("cannot tell CIPHERDIR's filesystem: ") + std::strerror(errno);
  if (const char* kind = network_kind(sf.f_type))
    return std::string("CIPHERDIR is on ") + kind + ", whose server checks every call's user itself and keeps its own quotas";
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  if (::syscall(SYS_capget, &h, g_full) != 0) return std::string("cannot read the daemon's capabilities: ") + std::strerror(errno);
  g_charged[0] = g_full[0];
  g_charged[1] = g_full[1];
  g_charged[CAP_SYS_RESOURCE / 32].effective &= ~(1u << (CAP_SYS_RESOURCE % 32));
  g_on = true;
  return "";
}

bool opcode_allocates(unsigned opcode) {
  switch (opcode) {
    case FUSE_WRITE:
    case FUSE_FALLOCATE:
    case FUSE_CREATE:
    case FUSE_TMPFILE:
    case FUSE_MKNOD:
    case FUSE_MKDIR:
    case FUSE_SYMLINK:
    case FUSE_LINK:
    case FUSE_RENAME:
    case FUSE_RENAME2:
    case FUSE_SETXATTR:
    case FUSE_SETATTR:
    case FUSE_COPY_FILE_RANGE:
      return true;
    default:
      return false;
  }
}

void CallerCharge::charge_to(uid_t uid, gid_t gid) {
  if (!g_on.load(std::memory_order_relaxed)) return;
  if (uid == 0) gid = 0;  // root's requests are the daemon's own charge, whatever its group
  if (known_ && uid == uid_ && gid == gid_) return;
  if (uid == 0) {
    // Back to the daemon's own: fsuid 0 raises the filesystem capabilities again; CAP_SYS_RESOURCE
    // comes back with the full set.
    ::setfsuid(0);
    ::setfsgid(0);
    if (set_caps(g_full) != 0) warn_once("capset");
  } else {
    ::setfsgid(gid);
    const bool from_root = !known_ || uid_ == 0;
    ::setfsuid(uid);
    // Leaving fsuid 0 drops the filesystem capabilities from the effective set: put them back,
    // without CAP_SYS_RESOURCE. Between two callers they stay as they were.
    if (from_root && set_caps(g_charged) != 0) warn_once("capset");
  }
  if (static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) != uid) {
    warn_once("setfsuid");
    known_ = false;
    return;
  }
  known_ = true;
  uid_ = uid;
  gid_ = gid;
}

}  // namespace gcfs::mount
