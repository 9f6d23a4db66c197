// mount --ctlsock: gocryptfs's control socket on a directory vault and on a reverse view. Paths
// map both ways and agree with what CIPHERDIR holds; errors come back as errno values; malformed
// and oversized requests get an error reply and the socket keeps serving; the socket is 0600,
// replaces a stale socket, refuses any other file, and goes at unmount.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "support/mounted_vault.h"
#include "support/ctl_client.h"
#include "support/unix_socket.h"

namespace gcfs::test {
namespace {

std::set<std::string> user_entries(const std::string& dir) {
  std::set<std::string> out;
  auto r = run_shell("ls -A " + shell_quote(dir));
  std::istringstream in(r.output);
  for (std::string e; std::getline(in, e);)
    if (!e.starts_with("gpucryptfs.") && !e.ends_with(".name")) out.insert(e);
  return out;
}

VaultOptions with_socket(const std::string& dir, bool mount) {
  VaultOptions o;
  o.mount = mount;
  o.parent_dir = dir;
  o.mount_args.push_back("--ctlsock " + shell_quote(dir + "/ctl.sock"));
  return o;
}

class CtlSock : public ::testing::Test {
 protected:
  explicit CtlSock(bool mount = true) : tmp_("gcfs-ctl"), v_(with_socket(tmp_.path(), mount)) {
    sock_ = tmp_.path() + "/ctl.sock";
  }
  TempDir tmp_;
  MountedVault v_;
  std::string sock_;
};

// The mount is made by the test itself.
class CtlSockPlace : public CtlSock {
 protected:
  CtlSockPlace() : CtlSock(false) {}
  ~CtlSockPlace() override { run_shell(MountedVault::unmount_command(true) + shell_quote(v_.mountpoint()) + " 2>/dev/null"); }
  std::string mount_with_socket() { return v_.mount_command(); }
};

TEST_F(CtlSock, MapsPathsBothWaysAsCipherdirHoldsThem) {
  struct stat st {};
  ASSERT_EQ(::lstat(sock_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  ASSERT_EQ(::mkdir(v_.path("dir").c_str(), 0755), 0);
  write_file(v_.path("dir/file.txt"), "x");
  const std::string long_name(200, 'N');
  write_file(v_.path("dir/" + long_name), "y");

  Client c(sock_);
  ASSERT_TRUE(c.connected());
  auto r = c.encrypt("dir");
  ASSERT_EQ(r["ErrNo"], 0) << r;
  const std::string cdir = r["Result"];
  EXPECT_EQ(user_entries(v_.cipherdir()), std::set<std::string>{cdir});
  r = c.encrypt("dir/file.txt");
  ASSERT_EQ(r["ErrNo"], 0) << r;
  const std::string cfile = r["Result"];
  ASSERT_TRUE(cfile.starts_with(cdir + "/"));
  EXPECT_TRUE(user_entries(v_.cipherdir() + "/" + cdir).count(cfile.substr(cdir.size() + 1)));
  EXPECT_EQ(c.decrypt(cfile)["Result"], "dir/file.txt");
  r = c.encrypt("dir/" + long_name);
  const std::string clong = r["Result"];
  EXPECT_NE(clong.find("gcfs.longname."), std::string::npos) << r;
  EXPECT_EQ(c.decrypt(clong)["Result"], "dir/" + long_name);
  // The name a file would have is given (as gocryptfs), and decrypts back.
  r = c.encrypt("dir/not yet made");
  EXPECT_EQ(r["ErrNo"], 0);
  EXPECT_EQ(c.decrypt(r["Result"])["Result"], "dir/not yet made");
  // Non-canonical input: mapped, with a warning.
  r = c.encrypt("/dir//file.txt");
  EXPECT_EQ(r["Result"], cfile);
  EXPECT_NE(r["WarnText"].get<std::string>().find("dir/file.txt"), std::string::npos) << r;
  // Errors: errno values, and the socket goes on serving.
  r = c.encrypt("no such dir/x");
  EXPECT_EQ(r["ErrNo"], ENOENT) << r;
  EXPECT_EQ(r["Result"], "");
  EXPECT_EQ(c.decrypt(cdir + "/NotAnEncryptedName")["ErrNo"], EBADMSG);
  EXPECT_EQ(c.encrypt("dir/" + std::string(300, 'x'))["ErrNo"], ENAMETOOLONG);
  EXPECT_EQ(c.ask("not json")["ErrNo"], -1);
  EXPECT_EQ(c.ask("[1,2]")["ErrNo"], -1);
  EXPECT_EQ(c.ask("{}")["ErrText"], "Empty input");
  EXPECT_EQ(c.ask(R"({"EncryptPath":"a","DecryptPath":"b"})")["ErrText"], "Ambiguous");
  EXPECT_EQ(c.ask(R"({"EncryptPath":7})")["ErrNo"], -1);
  EXPECT_EQ(c.ask(std::string(6000, '{'))["ErrNo"], -1) << "an oversized request is answered, not read forever";
  // Two requests in one write, each a line; one request split over two writes.
  Client d(sock_);
  auto first = d.ask("{\"EncryptPath\":\"dir\"}\n{\"EncryptPath\":\"dir/file.txt\"}\n");
  EXPECT_EQ(first["Result"], cdir);
  EXPECT_EQ(d.next()["Result"], cfile);
  Client e(sock_, 1);
  EXPECT_EQ(e.ask("{\"EncryptPath\":"), nullptr) << "incomplete: no reply yet";
  EXPECT_EQ(e.ask("\"dir\"}")["Result"], cdir);
}

TEST_F(CtlSockPlace, RefusesAnotherFileReplacesAStaleSocketAndGoesAtUnmount) {
  write_file(sock_, "precious");
  auto r = run_shell(mount_with_socket());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("not a socket"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(sock_), "precious") << "never replaced";
  ::unlink(sock_.c_str());
  ASSERT_TRUE(make_socket(tmp_.path(), "ctl.sock"));  // a socket nobody serves: left by a crash
  r = run_shell(mount_with_socket());
  ASSERT_EQ(r.status, 0) << r.output;
  {
    Client c(sock_);
    ASSERT_TRUE(c.connected());
    EXPECT_EQ(c.encrypt("")["ErrText"], "Empty input");
  }
  ASSERT_EQ(run_shell(MountedVault::unmount_command(false) + shell_quote(v_.mountpoint())).status, 0);
  struct stat st {};
  for (int i = 0; i < 100 && ::lstat(sock_.c_str(), &st) == 0; ++i) ::usleep(20000);
  EXPECT_NE(::lstat(sock_.c_str(), &st), 0) << "the socket outlived the mount";
}

}  // namespace
}  // namespace gcfs::test
