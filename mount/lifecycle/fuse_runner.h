// The life of one FUSE mount, shared by directory mode and volume mode: check the mountpoint,
// detach into the background, create the low-level session, mount, serve requests on a
// multi-threaded loop, and unmount on exit or on SIGINT/SIGTERM/SIGHUP.
//
// Mounting and unmounting: as root the daemon mounts itself and unmounts that mount by its
// identity, wherever it is by then, never by its path looked up again (mount/lifecycle/owned_mount.h); a
// user's daemon mounts and unmounts through libfuse's fusermount3, which checks that the mount is
// the user's.
//
// Detaching: the process forks BEFORE anything that does not survive fork (thread pools, CUDA
// contexts, mlock'd key memory) is built. The child runs `setup`, mounts, and only then tells the
// parent; the parent exits with 0 once the mount is ready, or prints the child's one-line error
// and exits with its code. So `gpucryptfs mount` returns only when the mount works, and errors
// found while setting up (a wrong password, no GPU) still reach the terminal.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"
#include "crypto/errors.h"
#include "mount/lifecycle/owned_mount.h"
#include "mount/transport/session_io.h"
#include "mount/transport/transport.h"

struct fuse_lowlevel_ops;

namespace gcfs::mount {

struct MountOptions {
  std::string mountpoint;
  bool foreground = false;
  bool read_only = false;
  bool allow_other = false;
  std::vector<std::string> extra_options;  // each like "-o" takes: "a,b=c"
  std::string fsname;                      // shown in /proc/mounts (the backing path)
  std::string subtype = "gpucryptfs";      // /proc/mounts type is fuse.<subtype>
  unsigned max_threads = 16;
  // The kernel reads ahead at most this much per FUSE request (its default is 128 KiB); larger
  // requests give the engines larger batches. Set through sysfs once mounted (root only); 0 leaves
  // the kernel's default.
  unsigned read_ahead_kb = 1024;
  // How requests travel (mount/transport/transport.h). Uring refuses to mount where io_uring is not had.
  Transport transport = Transport::Auto;
};

// What setup hands the runner: the operations and the pointer fuse_req_userdata() returns.
// `keep_alive` owns whatever userdata points to; it is destroyed after the unmount.
struct FuseFilesystem {
  const fuse_lowlevel_ops* ops = nullptr;
  void* userdata = nullptr;
  std::shared_ptr<void> keep_alive;
  // The request workers' receive buffers (the engine's memory) and their per-thread preparation;
  // see mount/transport/request_loop.h. Both optional.
  std::function<HostBuffer(std::size_t)> allocate_buffer;
  std::function<void()> on_worker_start;
  // ops->create makes an unnamed file when fi->flags carries __O_TMPFILE (mount/transport/session_io.h):
  // the kernel's FUSE_TMPFILE reaches it. Off: FUSE_TMPFILE gets ENOSYS (open(O_TMPFILE) fails
  // with EOPNOTSUPP).
  bool tmpfile_as_create = false;
  // The filesystem clears the setid bits itself wherever the kernel's rules call for it (on a
  // write, when write_kills_suidgid(fi) says so: mount/transport/session_io.h), so INIT may settle
  // FUSE_HANDLE_KILLPRIV_V2, which ends the kernel's GETXATTR of security.capability before every
  // write.
  bool kills_setid_on_write = false;
  // READs and WRITEs answered without libfuse's parsing and bookkeeping (mount/transport/session_io.h),
  // with userdata as ctx; they must do what ops->read and ops->write do. Optional.
  SessionIoOptions::DirectRead direct_read = nullptr;
  SessionIoOptions::DirectWrite direct_write = nullptr;
  // Called once no request can run any more (every serving thread has stopped), before the
  // transport's memory, the session and keep_alive are torn down, which can take seconds (GPU
  // contexts, page-locked buffers): what a remount right after the unmount waits for (the vault's
  // write lock) is released here. Optional.
  std::function<void()> on_served;
};

// Thrown by setup to end with a particular exit code (other exceptions go through error_code_of),
// and thrown by run_fuse_mount when the mount could not be made.
struct MountFailure : UserError {
  MountFailure(int code, const std::string& message) : UserError(message), exit_code(code) {}
  int exit_code;
};

// A missing, non-directory or non-empty mountpoint (non-empty is allowed with allow_nonempty:
// mount --nonempty). Throws MountFailure with bad_mountpoint_code.
void check_mountpoint(const std::string& path, int bad_mountpoint_code, bool allow_nonempty = false);

// Runs setup (in the child when detaching), mounts, serves until unmounted, and returns the exit
// code for a mount that ran (0 when it was unmounted cleanly). A parent that detached returns 0
// as soon as the child reports the mount ready. Throws MountFailure when setup or the mount
// fails, in the foreground or in the parent of a detached child; error_code_of maps an exception
// thrown by setup to that MountFailure's exit code.
// For a daemon that detached without --log: says where its log went when that is a file (no
// syslog daemon listens), as a warning, so that a mount still attached to its terminal prints it.
void announce_detached_log(const std::string& file);

int run_fuse_mount(const MountOptions& options, const std::function<FuseFilesystem()>& setup,
                   const std::function<int(const std::exception&)>& error_code_of);

// Unmounts the mount that run_fuse_mount serves in this process, as its owner would, with an
// ordinary unmount (never a lazy one): as root the mount it made, wherever it is now, checked to
// be that mount (mount/lifecycle/owned_mount.h); otherwise through fusermount3 -u (Busy when that fails).
// Gone when no mount is served (any more). For --idle, from any thread.
UnmountResult unmount_served_mount();

}  // namespace gcfs::mount
