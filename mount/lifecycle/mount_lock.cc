// One read-write mount per vault, and what mountinfo says of the others (mount_lock.h).
#include "mount/lifecycle/mount_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "fs/chunk_journal.h"
#include "fs/file_lock.h"
#include "fs/safe_open.h"
#include "fs/unique_fd.h"
#include "mount/cli/commands.h"
#include "mount/cli/exit_status.h"
#include "mount/lifecycle/mount_table.h"

namespace gcfs::cli {
namespace {


std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
}

// The pid that holds an flock on the file (dev, ino), from /proc/locks; 0 when none is listed.
// Lines read "1: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF"; a waiter's line has "->".
pid_t flock_holder(dev_t dev, ino_t ino) {
  char want[64];
  std::snprintf(want, sizeof want, "%02x:%02x:%lu", major(dev), minor(dev), static_cast<unsigned long>(ino));
  std::ifstream in("/proc/locks");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string num, kind, advisory, mode, pid, id;
    if (!(f >> num >> kind) || kind == "->" || kind != "FLOCK") continue;
    if (!(f >> advisory >> mode >> pid >> id) || id != want) continue;
    return static_cast<pid_t>(std::atol(pid.c_str()));
  }
  return 0;
}

// The mount namespace of a process, as /proc names it ("mnt:[4026531841]"); "" where it cannot be
// read (the process is gone, or it belongs to another user and we are not root).
std::string mount_namespace_of(const std::string& pid) {
  char buf[64];
  const ssize_t n = ::readlink(("/proc/" + pid + "/ns/mnt").c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// Whether a live process shares this process's mount namespace, so that a mount of its would be
// listed in our /proc/self/mountinfo.
bool in_our_mount_namespace(pid_t pid) {
  if (pid <= 0) return false;
  const std::string theirs = mount_namespace_of(std::to_string(pid));
  return !theirs.empty() && theirs == mount_namespace_of("self");
}

// How long a holder that serves no mount of the vault here, but shares our mount namespace, is
// waited for beyond the grace: such a process is not serving the vault anywhere (its mount would
// be listed), so it is most often a daemon still tearing down after its unmount, which on a loaded
// machine (two GPUs' contexts to destroy, two dozen test suites at once) took longer than the grace.
constexpr std::chrono::seconds kExitingHolderWait{30};

// Whether someone else holds the journal's lock now (LOCK_SH fails only against an exclusive
// holder, and two checks at once never fail each other). fd: the journal, opened O_RDONLY.
bool held_now(int fd, std::chrono::milliseconds grace) {
  if (flock_with_grace(fd, LOCK_SH, grace) == EWOULDBLOCK) return true;
  ::flock(fd, LOCK_UN);
  return false;
}

}  // namespace

std::vector<ListedMount> gpucryptfs_mounts_of(const std::string& path) {
  const std::string want = real_path(path);
  std::vector<ListedMount> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root MOUNTPOINT options [optional fields] - FSTYPE SOURCE superoptions
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, dev, root, mountpoint, options, fstype, source;
    if (!(head >> id >> parent >> dev >> root >> mountpoint >> options) || !(tail >> fstype >> source)) continue;
    if (fstype != "fuse.gpucryptfs" || mount::unescape_mountinfo(source) != want) continue;
    out.push_back({mount::unescape_mountinfo(mountpoint), options == "ro" || options.starts_with("ro,")});
  }
  return out;
}

namespace {

// The newest read-write mount of the vault listed here, or "".
std::string newest_read_write_mountpoint(const std::string& cipherdir) {
  std::string mp;
  for (const auto& m : gpucryptfs_mounts_of(cipherdir))
    if (!m.read_only) mp = m.mountpoint;
  return mp;
}

}  // namespace

LockHolder vault_write_lock_holder(const std::string& cipherdir, std::chrono::milliseconds grace) {
  LockHolder h;
  UniqueFd dir(::open(cipherdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return h;  // the checks that follow name the problem
  // A journal that is not a regular file of CIPHERDIR holds no lock (the daemon reports it).
  OpenResult j = open_beneath(dir.get(), kJournalFileName, FileType::Regular, O_RDONLY);
  if (!j) return h;
  const auto rw_mountpoint = [&] { return newest_read_write_mountpoint(cipherdir); };
  if (!held_now(j.fd.get(), std::chrono::milliseconds(0))) return h;
  h.mountpoint = rw_mountpoint();
  // Held, and no mount to show for it: most often a daemon still exiting after its unmount.
  if (h.mountpoint.empty() && !held_now(j.fd.get(), grace)) return h;
  struct stat st {};
  if (::fstat(j.fd.get(), &st) == 0) h.pid = flock_holder(st.st_dev, st.st_ino);
  if (h.mountpoint.empty() && grace.count() > 0 && in_our_mount_namespace(h.pid)) {
    // Still held after the grace by a process of this mount namespace that serves no mount of the
    // vault: wait for it a while longer (kExitingHolderWait), saying so, unless it mounts the vault
    // after all or goes away.
    std::fprintf(stderr,
                 "gpucryptfs: waiting up to %lld s for process %ld to let go of %s (it holds the vault's lock "
                 "but serves no mount of it: most likely a daemon still exiting)\n",
                 static_cast<long long>(kExitingHolderWait.count()), static_cast<long>(h.pid), cipherdir.c_str());
    const auto until = std::chrono::steady_clock::now() + kExitingHolderWait;
    while (std::chrono::steady_clock::now() < until) {
      if (!held_now(j.fd.get(), std::chrono::milliseconds(250))) return LockHolder{};
      h.mountpoint = rw_mountpoint();
      if (!h.mountpoint.empty()) break;
    }
    h.pid = flock_holder(st.st_dev, st.st_ino);  // the holder may have changed meanwhile
  }
  h.held = true;
  return h;
}

std::string vault_in_use_message(const std::string& cipherdir, const LockHolder& h) {
  const std::string pid = h.pid > 0 ? " (pid " + std::to_string(h.pid) + ")" : "";
  if (!h.mountpoint.empty())
    return cipherdir + " is already mounted read-write on " + h.mountpoint +
           " (one read-write mount per vault: unmount it with 'fusermount3 -u " + h.mountpoint +
           "', or add --read-only to mount it beside)";
  return cipherdir + " is in use by another gpucryptfs process" + pid +
         " that holds its crash journal, mounted where this machine does not list it (another mount namespace "
         "or machine); one read-write mount per vault: add --read-only to mount it beside";
}

void refuse_second_read_write_mount(const std::string& cipherdir) {
  const LockHolder h = vault_write_lock_holder(cipherdir, kLockGrace);
  if (h.held) throw CodedError(kExitVaultInUse, vault_in_use_message(cipherdir, h));
}

UniqueFd take_vault_write_lock(const std::string& cipherdir, const std::string& why, bool create) {
  UniqueFd dir(::open(cipherdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw UserError("cannot open " + cipherdir + ": " + std::strerror(errno));
  OpenResult j = open_beneath(dir.get(), kJournalFileName, FileType::Regular, O_RDWR | (create ? O_CREAT : 0), 0600);
  if (!create && j.error == ENOENT) return UniqueFd();
  if (!j) throw UserError(cipherdir + "/" + kJournalFileName + " " + j.why() + ": " + why + " needs the vault's lock");
  const int e = flock_with_grace(j.fd.get(), LOCK_EX);  // a daemon that was just unmounted may still be exiting
  if (e == EWOULDBLOCK) {
    LockHolder h;
    h.held = true;
    h.mountpoint = newest_read_write_mountpoint(cipherdir);
    struct stat st {};
    if (::fstat(j.fd.get(), &st) == 0) h.pid = flock_holder(st.st_dev, st.st_ino);
    const std::string pid = h.pid > 0 ? " (pid " + std::to_string(h.pid) + ")" : "";
    throw CodedError(kExitVaultInUse,
                     why + " refused: " + cipherdir + " is in use by a gpucryptfs process" + pid +
                         (h.mountpoint.empty() ? std::string(" that holds its crash journal (a mount in another mount "
                                                             "namespace or on another machine?)")
                                               : " mounted read-write on " + h.mountpoint) +
                         "; unmount it first");
  }
  if (e != 0) throw UserError("cannot lock " + cipherdir + "/" + kJournalFileName + ": " + std::strerror(e));
  return std::move(j.fd);
}

void refuse_mounted_volume(const std::string& container, bool read_only) {
  const OpenResult c = open_regular(container, O_RDONLY);
  if (!c) return;  // the checks that follow name the problem
  const int e = flock_with_grace(c.fd.get(), read_only ? LOCK_SH : LOCK_EX, std::chrono::milliseconds(0));
  if (e != EWOULDBLOCK) return;  // free (released again when c closes), or no flock here: the daemon says
  const auto mounts = gpucryptfs_mounts_of(container);
  if (mounts.empty()) return;  // a daemon still exiting: the new one waits for it
  const std::string& mp = mounts.back().mountpoint;
  throw CodedError(kExitVaultInUse, container + " is already mounted on " + mp +
                                        " (a volume is mounted once at a time; unmount it with 'fusermount3 -u " + mp + "')");
}

}  // namespace gcfs::cli
