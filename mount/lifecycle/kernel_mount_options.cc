// The kernel's share of the -o string, for the mounts a root daemon makes (kernel_mount_options.h).
#include "mount/lifecycle/kernel_mount_options.h"

#include <sys/mount.h>

#include <algorithm>
#include <array>
#include <stdexcept>

namespace gcfs::mount {
namespace {

struct FlagOption {
  const char* name;
  unsigned long flag;
  bool on;
};

// libfuse 3.14's table of mount flags (lib/mount.c), the only ones its option parser accepts.
constexpr std::array<FlagOption, 13> kFlagOptions{{
    {"rw", MS_RDONLY, false},
    {"ro", MS_RDONLY, true},
    {"suid", MS_NOSUID, false},
    {"nosuid", MS_NOSUID, true},
    {"dev", MS_NODEV, false},
    {"nodev", MS_NODEV, true},
    {"exec", MS_NOEXEC, false},
    {"noexec", MS_NOEXEC, true},
    {"async", MS_SYNCHRONOUS, false},
    {"sync", MS_SYNCHRONOUS, true},
    {"atime", MS_NOATIME, false},
    {"noatime", MS_NOATIME, true},
    {"dirsync", MS_DIRSYNC, true},
}};

// Options the kernel's FUSE filesystem takes with a value, passed on as they are written.
constexpr std::array<const char*, 6> kValueOptions{"max_read", "blksize", "context", "fscontext", "defcontext",
                                                   "rootcontext"};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out(1);
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) out.back() += s[++i];
    else if (s[i] == ',') out.emplace_back();
    else out.back() += s[i];
  }
  return out;
}

void add_flag(KernelMountOptions& k, const std::string& flag) {
  if (std::find(k.flags.begin(), k.flags.end(), flag) == k.flags.end()) k.flags.push_back(flag);
}

}  // namespace

KernelMountOptions kernel_mount_options(const std::string& options) {
  KernelMountOptions k;
  k.ms_flags = MS_NOSUID | MS_NODEV;
  std::string fsname;
  for (const std::string& o : split(options)) {
    if (o.empty()) continue;
    const auto eq = o.find('=');
    const std::string name = o.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : o.substr(eq + 1);
    const auto flag = std::find_if(kFlagOptions.begin(), kFlagOptions.end(), [&](const FlagOption& f) { return o == f.name; });
    if (flag != kFlagOptions.end()) {
      k.ms_flags = flag->on ? k.ms_flags | flag->flag : k.ms_flags & ~flag->flag;
    } else if (o == "default_permissions" || o == "allow_other") {
      add_flag(k, o);
    } else if (o == "allow_root") {
      // libfuse lets everyone in at the kernel and turns away all but root and the owner itself.
      add_flag(k, "allow_other");
    } else if (eq != std::string::npos &&
               std::find(kValueOptions.begin(), kValueOptions.end(), name) != kValueOptions.end()) {
      k.values.emplace_back(name, value);
    } else if (eq != std::string::npos && name == "fsname") {
      fsname = value;  // the last one counts, as in libfuse
    } else if (eq != std::string::npos && name == "subtype") {
      k.subtype = value;
    } else if (o == "debug" || (eq != std::string::npos && name == "user")) {
      // libfuse's own setting, and a note for a regular-file /etc/mtab (Debian's is the kernel's
      // list, where nothing is written): neither is the kernel's.
    } else if (o == "auto_unmount") {
      throw std::invalid_argument(
          "-o auto_unmount is not for a mount made as root: it has fusermount3 unmount the path when the daemon "
          "ends, whatever is mounted there by then; the daemon unmounts its own mount on SIGTERM, SIGINT and SIGHUP");
    } else if (o == "blkdev") {
      throw std::invalid_argument("-o blkdev is for filesystems on a block device; a gpucryptfs mount is not one");
    } else {
      throw std::invalid_argument("-o " + o + ": not an option the FUSE mount takes");
    }
  }
  if (!fsname.empty()) k.source = fsname;
  else if (!k.subtype.empty()) k.source = k.subtype;
  return k;
}

}  // namespace gcfs::mount
