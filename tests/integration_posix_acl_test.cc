// POSIX ACLs and the trusted.* and security.* namespaces (issue 19, item 4), driven with the
// acl and attr tools as a user would. Every expectation is what the same commands gave on a
// loop-mounted ext4 image on the development machine. nobody is the other user (setpriv).
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

class PosixAcl : public ::testing::Test {
 protected:
  PosixAcl() : v_(served_to_all()) {
    const std::string top = v_.mountpoint().substr(0, v_.mountpoint().rfind('/'));
    EXPECT_EQ(::chmod(top.c_str(), 0755), 0) << std::strerror(errno);
    EXPECT_EQ(::chmod(v_.mountpoint().c_str(), 0755), 0) << std::strerror(errno);
  }
  static VaultOptions served_to_all() {
    VaultOptions o;
    o.mount_args.push_back("--allow-other");
    return o;
  }
  // Runs script in the mount; NB runs a command as nobody, m prints "mode uid:gid", acl the
  // access ACL on one line.
  std::string sh(const std::string& script) {
    auto r = run_shell(
        "NB='setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all'\n"
        "m() { stat -c '%a %u:%g' \"$1\"; }\n"
        "acl() { getfacl -cp \"$@\" 2>&1 | tr '\\n\\t' '  '; }\n" +
            script,
        v_.mountpoint());
    return r.output;
  }
  MountedVault v_;
};

TEST_F(PosixAcl, NamedUserEntriesAreEnforcedAndFollowChmod) {
  GCFS_REQUIRE_PROGRAM("setfacl");
  GCFS_REQUIRE_PROGRAM("setpriv");
  EXPECT_EQ(sh("echo secret > f; chmod 600 f; $NB cat f 2>&1 | sed 's/.*: //'"), "Permission denied\n");
  EXPECT_EQ(sh("setfacl -m u:nobody:r f && m f && acl f"),
            "640 0:0\nuser::rw- user:nobody:r-- group::--- mask::r-- other::---  ");
  EXPECT_EQ(sh("$NB cat f"), "secret\n") << "the kernel grants what the ACL says";
  // chmod sets the mask: the named entry loses its effect.
  EXPECT_EQ(sh("chmod 600 f && acl f"), "user::rw- user:nobody:r-- #effective:--- group::--- mask::--- other::---  ");
  EXPECT_EQ(sh("$NB cat f 2>&1 | sed 's/.*: //'"), "Permission denied\n");
  // An ACL the mode can say is not kept; setfacl -b removes the rest.
  EXPECT_EQ(sh("setfacl -b f && m f && getfattr -m system.posix -d f | grep -c posix_acl"), "600 0:0\n0\n");
  EXPECT_EQ(sh("setfacl -m u::rwx,g::r,o::- f && m f && getfattr -m system.posix -d f | grep -c posix_acl"),
            "740 0:0\n0\n");
  // Only the owner sets ACLs.
  EXPECT_EQ(sh("$NB setfacl -m u:nobody:rwx f 2>&1 | sed 's/.*: //'"), "Operation not permitted\n");
}

TEST_F(PosixAcl, DefaultAclsAreInheritedInsteadOfTheUmask) {
  GCFS_REQUIRE_PROGRAM("setfacl");
  GCFS_REQUIRE_PROGRAM("setpriv");
  // A file made before the default ACL is set, so the daemon has looked for one already.
  sh("mkdir d && touch d/before && setfacl -d -m u:nobody:rwx,g::rx,o::- d && setfacl -m u:nobody:rwx d && "
     "(umask 077; echo data > d/file; mkdir d/sub)");
  EXPECT_EQ(sh("m d/file; acl d/file"),
            "660 0:0\nuser::rw- user:nobody:rwx #effective:rw- group::r-x #effective:r-- mask::rw- other::---  ");
  EXPECT_EQ(sh("m d/sub; acl -d d/sub"), "770 0:0\nuser::rwx user:nobody:rwx group::r-x mask::rwx other::---  ");
  EXPECT_EQ(sh("$NB cat d/file"), "data\n");
  EXPECT_EQ(sh("$NB sh -c 'echo n > d/sub/n && echo ok'"), "ok\n");
  // Once the default ACL is removed, the umask applies again.
  EXPECT_EQ(sh("setfacl -k d && (umask 027; touch d/after) && m d/after && getfacl -cp d/after | wc -l"),
            "640 0:0\n4\n");  // three entries and getfacl's closing blank line, as on ext4
  // Without a default ACL the umask applies as before.
  EXPECT_EQ(sh("(umask 022; touch plain; mkdir pd); (umask 0; touch p0); m plain; m pd; m p0"),
            "644 0:0\n755 0:0\n666 0:0\n");
  // Stored in CIPHERDIR, encrypted: they survive a remount and never show in the clear there.
  v_.remount();
  EXPECT_EQ(sh("acl d/file"), "user::rw- user:nobody:rwx #effective:rw- group::r-x #effective:r-- mask::rw- other::---  ");
  EXPECT_EQ(run_shell("getfattr -R -m - -d " + shell_quote(v_.cipherdir()) + " 2>/dev/null | grep -c -e posix_acl -e nobody").output,
            "0\n");
}

TEST_F(PosixAcl, CopyToolsKeepAcls) {
  GCFS_REQUIRE_PROGRAM("setfacl");
  GCFS_REQUIRE_PROGRAM("rsync");
  sh("mkdir d && setfacl -d -m u:nobody:rwx d && touch d/file && setfacl -m u:nobody:r d/file");
  // The file inherited g::r-x from the default ACL (the group class of a 0666 create), as on ext4.
  const std::string want = "user::rw- user:nobody:r-- group::r-x mask::r-x other::r--  ";
  EXPECT_EQ(sh("acl d/file"), want);
  EXPECT_EQ(sh("cp -a d d_cp && acl d_cp/file"), want);
  EXPECT_EQ(sh("acl -d d_cp"), "user::rwx user:nobody:rwx group::r-x mask::rwx other::r-x  ");
  EXPECT_EQ(sh("rsync -aA d/ d_rs/ && acl d_rs/file"), want);
}

TEST_F(PosixAcl, TrustedAndSecurityNamespacesAreRootOnlyWhereTheKernelSaysSo) {
  GCFS_REQUIRE_PROGRAM("setfattr");
  GCFS_REQUIRE_PROGRAM("setpriv");
  EXPECT_EQ(sh("touch x && chmod 666 x && setfattr -n trusted.t -v tv x && setfattr -n security.s -v sv x && "
               "getfattr --only-values -n trusted.t x && echo && getfattr --only-values -n security.s x"),
            "tv\nsv");
  EXPECT_EQ(sh("$NB getfattr --only-values -n trusted.t x 2>&1 | sed 's/.*: //'"), "No such attribute\n");
  EXPECT_EQ(sh("$NB setfattr -n trusted.u -v x x 2>&1 | sed 's/.*: //'"), "Operation not permitted\n");
  EXPECT_EQ(sh("$NB getfattr --only-values -n security.s x"), "sv");
  EXPECT_EQ(sh("$NB setfattr -n security.u -v x x 2>&1 | sed 's/.*: //'"), "Operation not permitted\n");
  EXPECT_EQ(sh("$NB getfattr -m - x | grep -v '^#' | tr '\\n' ' '"), "security.s  ");
  EXPECT_EQ(sh("getfattr -m - x | grep -v '^#' | tr '\\n' ' '"), "security.s trusted.t  ");
}

// Symlinks, FIFOs and devices take trusted.* (and security.*) attributes on ext4, but no user.*
// ones, the namespace the daemon stores every attribute in on the backing file: theirs are kept
// as trusted.gcfs.* ones (xfstests generic/062). They read back after a remount, and user.* stays
// refused as on ext4.
TEST_F(PosixAcl, SymlinksFifosAndDevicesKeepTrustedAttributes) {
  GCFS_REQUIRE_PROGRAM("setfattr");
  if (::geteuid() != 0) GTEST_SKIP() << "trusted.* needs root";
  EXPECT_EQ(sh("ln -s target lnk && mkfifo fifo && mknod chr c 1 3 || exit 1\n"
               "for f in lnk fifo chr; do setfattr -h -n trusted.name -v \"v-$f\" $f && setfattr -h -n trusted.gone -v x $f "
               "&& setfattr -h -x trusted.gone $f && echo \"$f: $(getfattr -h --only-values -n trusted.name $f) "
               "$(getfattr -h -m - $f | grep -v '^#' | tr '\\n' ' ')\"; "
               "setfattr -h -n user.u -v x $f 2>&1 | sed 's/.*: //'; done"),
            "lnk: v-lnk trusted.name  \nOperation not permitted\n"
            "fifo: v-fifo trusted.name  \nOperation not permitted\n"
            "chr: v-chr trusted.name  \nOperation not permitted\n");
  v_.remount();
  EXPECT_EQ(sh("for f in lnk fifo chr; do getfattr -h --only-values -n trusted.name $f; echo; done"), "v-lnk\nv-fifo\nv-chr\n");
  // Stored under the other prefix, never as user.* (which the backing filesystem refuses there).
  EXPECT_EQ(run_shell("getfattr -h -R -m - " + shell_quote(v_.cipherdir()) + " 2>/dev/null | grep -c '^trusted.gcfs.'").output,
            "3\n");
}

// security.capability is kept (tar --xattrs and rsync -X of /usr/bin restore it), never grants
// anything (the mount is nosuid), and goes on every change of a file's data, as on ext4: a write
// (buffered or O_DIRECT, by root too), fallocate, truncate, chown; after a remount as well
// (xfstests generic/688).
TEST_F(PosixAcl, FileCapabilitiesAreKeptAndEveryChangeOfTheDataDropsThem) {
  GCFS_REQUIRE_PROGRAM("setcap");
  GCFS_REQUIRE_PROGRAM("getcap");
  if (::geteuid() != 0) GTEST_SKIP() << "setcap needs root";
  const std::string each =
      "cp /bin/true t || exit 1\n"
      "for how in 'dd if=/dev/zero of=t bs=1 count=1 conv=notrunc status=none' "
      "'dd if=/dev/zero of=t bs=4096 count=1 oflag=direct conv=notrunc status=none' 'fallocate -o 0 -l 65536 t' "
      "'truncate -s 8192 t' 'chown 1:1 t' \"$NB sh -c 'echo x >> t'\"; do chmod 666 t; setcap cap_net_raw+ep t; "
      "before=$(getcap t | wc -l); eval \"$how\"; echo \"$before $(getcap t | wc -l)\"; done\n";
  EXPECT_EQ(sh(each), "1 0\n1 0\n1 0\n1 0\n1 0\n1 0\n");
  EXPECT_EQ(sh("setcap cap_net_raw+ep t && getcap t"), "t cap_net_raw=ep\n");
  v_.remount();  // the daemon no longer knows: it asks the backing file once
  EXPECT_EQ(sh("getcap t; echo more >> t; getcap t | wc -l"), "t cap_net_raw=ep\n0\n");
  EXPECT_EQ(sh("setcap cap_net_raw+ep t"), "");
  v_.remount();
  EXPECT_EQ(sh("echo more >> t; getcap t | wc -l"), "0\n") << "a write before anyone asked";
}

}  // namespace
}  // namespace gcfs::test
