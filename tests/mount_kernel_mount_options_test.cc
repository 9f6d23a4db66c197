// The kernel's share of a -o string, for the mounts a root daemon makes itself: every option
// libfuse 3.14 accepts keeps the effect it had when libfuse mounted, and the two it cannot have
// are refused by name.
#include <sys/mount.h>

#include <gtest/gtest.h>

#include <stdexcept>

#include "mount/lifecycle/kernel_mount_options.h"

namespace gcfs::mount {
namespace {

using Values = std::vector<std::pair<std::string, std::string>>;

TEST(KernelMountOptions, WhatTheDaemonPassesBecomesTheMountsSourceTypeAndParameters) {
  const auto k = kernel_mount_options("default_permissions,subtype=gpucryptfs,fsname=/srv/a\\,b,allow_other");
  EXPECT_EQ(k.source, "/srv/a,b");
  EXPECT_EQ(k.subtype, "gpucryptfs");
  EXPECT_EQ(k.flags, (std::vector<std::string>{"default_permissions", "allow_other"}));
  EXPECT_TRUE(k.values.empty());
  EXPECT_EQ(k.ms_flags, static_cast<unsigned long>(MS_NOSUID | MS_NODEV)) << "libfuse's defaults";
}

TEST(KernelMountOptions, MountFlagsAreSetAndClearedInOrder) {
  EXPECT_EQ(kernel_mount_options("ro,noexec,noatime,sync,dirsync").ms_flags,
            static_cast<unsigned long>(MS_NOSUID | MS_NODEV | MS_RDONLY | MS_NOEXEC | MS_NOATIME | MS_SYNCHRONOUS | MS_DIRSYNC));
  EXPECT_EQ(kernel_mount_options("ro,rw,suid,dev,noexec,exec,noatime,atime,sync,async").ms_flags, 0ul);
}

TEST(KernelMountOptions, KernelValuesPassAsWritten) {
  const auto k = kernel_mount_options("max_read=65536,blksize=4096,context=system_u:object_r:tmp_t:s0");
  EXPECT_EQ(k.values, (Values{{"max_read", "65536"}, {"blksize", "4096"}, {"context", "system_u:object_r:tmp_t:s0"}}));
}

TEST(KernelMountOptions, SourceFallsBackAsLibfuseChoosesIt) {
  EXPECT_EQ(kernel_mount_options("subtype=x").source, "x");
  EXPECT_EQ(kernel_mount_options("").source, "/dev/fuse");
  EXPECT_EQ(kernel_mount_options("fsname=a,fsname=b").source, "b") << "the last one counts";
}

TEST(KernelMountOptions, LibfusesOwnSettingsAreNotTheKernels) {
  const auto k = kernel_mount_options("debug,user=alice,allow_root");
  EXPECT_EQ(k.flags, std::vector<std::string>{"allow_other"}) << "allow_root: the kernel lets all in, libfuse checks";
  EXPECT_TRUE(k.values.empty());
}

TEST(KernelMountOptions, WhatCannotBePassedIsRefusedByName) {
  for (const std::string o : {"auto_unmount", "blkdev", "bogus", "nodiratime"}) {
    try {
      kernel_mount_options("default_permissions," + o);
      ADD_FAILURE() << o << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(o), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gcfs::mount
