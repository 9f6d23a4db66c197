// --idle DURATION: unmount after that long without use, as gocryptfs's -idle does. "Use" is any
// request from the kernel but its own housekeeping (FORGET), or any open file or directory: a
// program that holds a file open without touching it (an editor, a shell whose working directory
// is inside) keeps the mount, as it would keep any disk from being unmounted.
//
// The daemon counts both by wrapping its operation table (every operation but FORGET bumps a
// request counter; OPEN, CREATE and OPENDIR that hand out a handle raise the open count, RELEASE
// and RELEASEDIR lower it), so nothing in the filesystem code or the request loop changes, and a
// thread checks them a tenth of DURATION apart. The unmount is an ordinary one (never lazy): if
// something holds the mount after all, it fails with EBUSY and the daemon tries again later. It
// unmounts the mount the daemon made, wherever a rename moved it to, and nothing else
// (fuse_runner.h, unmount_served_mount).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "mount/lifecycle/owned_mount.h"
#include "mount/transport/session_io.h"

struct fuse_lowlevel_ops;

namespace gcfs::mount {

// A duration as gocryptfs and systemd write them: "90" (seconds), "90s", "500ms", "15m", "2h",
// "1h30m". Throws boost::program_options::error naming option for anything else, or zero.
std::chrono::milliseconds parse_duration(const std::string& option, const std::string& text);

class IdleWatch {
 public:
  // The table the daemon should serve with: inner's operations, counted. One per process (the
  // counts are the daemon's); inner must outlive the mount.
  static const fuse_lowlevel_ops* counting(const fuse_lowlevel_ops* inner);
  // The same for the READs and WRITEs answered outside the table (FuseFilesystem::direct_read).
  static SessionIoOptions::DirectRead counting(SessionIoOptions::DirectRead inner);
  static SessionIoOptions::DirectWrite counting(SessionIoOptions::DirectWrite inner);

  // Checks the counts until destroyed; after `idle` without use, calls unmount once (again after
  // another `idle` when the mount was busy, or could not be verified where it is listed).
  IdleWatch(std::chrono::milliseconds idle, std::function<UnmountResult()> unmount);
  ~IdleWatch();
  IdleWatch(const IdleWatch&) = delete;
  IdleWatch& operator=(const IdleWatch&) = delete;

 private:
  void run();
  const std::chrono::milliseconds idle_;
  const std::function<UnmountResult()> unmount_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gcfs::mount
