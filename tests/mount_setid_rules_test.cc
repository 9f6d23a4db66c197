// The setid rules on their own (mount/daemon/setid_rules.h), one request kind at a time, against what
// ext4 does (the same cases run end to end in integration_posix_setid_test).
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "mount/daemon/setid_rules.h"

namespace gcfs::mount {
namespace {

CallerCreds nobody() {
  CallerCreds c;
  c.uid = 65534;
  c.gid = 65534;
  return c;
}

CallerCreds root(bool fsetid = true) {
  CallerCreds c;
  c.cap_fsetid = fsetid;
  return c;
}

mode_t after(mode_t mode, gid_t gid, SetattrRequest r, const CallerCreds& c) {
  return mode_after_setattr(S_IFREG | mode, gid, r, c);
}

SetattrRequest write_kill() {
  SetattrRequest r;
  r.remove_privileges = true;
  return r;
}

SetattrRequest truncate() {
  SetattrRequest r;
  r.size = true;
  return r;
}

TEST(PosixSetidRules, WriteAndTruncateWithoutCapFsetid) {
  for (const SetattrRequest& r : {write_kill(), truncate()}) {
    EXPECT_EQ(after(06777, 0, r, nobody()), 0777u);
    EXPECT_EQ(after(02666, 0, r, nobody()), 0666u) << "not in the group: S_ISGID goes without group execute too";
    EXPECT_EQ(after(02666, 65534, r, nobody()), 02666u) << "in the group, no group execute: it stays";
    EXPECT_EQ(after(02676, 65534, r, nobody()), 0676u) << "group execute: it goes";
    EXPECT_EQ(after(06766, 0, r, root(false)), 02766u) << "root's group without CAP_FSETID";
    EXPECT_EQ(after(06777, 0, r, root()), 06777u) << "CAP_FSETID keeps both";
  }
  CallerCreds member = nobody();
  member.groups = {1234};
  EXPECT_EQ(after(02666, 1234, write_kill(), member), 02666u) << "a supplementary group counts";
}

TEST(PosixSetidRules, ChownAndChmod) {
  SetattrRequest chown;
  chown.owner = true;
  EXPECT_EQ(after(06777, 0, chown, root()), 0777u) << "chown clears S_ISUID even for root";
  EXPECT_EQ(after(02666, 0, chown, root()), 02666u);
  chown.new_gid = 65534;
  EXPECT_EQ(after(02666, 0, chown, nobody()), 0666u) << "judged on the old group";
  SetattrRequest chmod;
  chmod.mode = true;
  chmod.new_mode = 02755;
  EXPECT_EQ(after(0644, 0, chmod, nobody()), 0755u);
  EXPECT_EQ(after(0644, 65534, chmod, nobody()), 02755u);
  EXPECT_EQ(mode_after_setattr(S_IFDIR | 0755, 0, chmod, nobody()), 0755u) << "directories too";
  EXPECT_EQ(mode_after_setattr(S_IFDIR | 02755, 0, truncate(), nobody()), 02755u) << "only files lose bits on change";
}

}  // namespace
}  // namespace gcfs::mount
