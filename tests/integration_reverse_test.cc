// Reverse mode end to end: `gpucryptfs init --reverse PLAINDIR`, `gpucryptfs mount --reverse
// PLAINDIR VIEW`, the view copied out as a backup tool would, and the copy mounted as an ordinary
// vault, which must read back PLAINDIR byte for byte. Also: the same bytes on every mount, a
// change that changes only the chunks it touches, the wrong password, and a read-only view that
// hides the reverse config and never opens PLAINDIR's FIFOs.
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <tuple>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

class Reverse : public ::testing::Test {
 protected:
  Reverse() : root_("gcfs-reverse") {
    plain_ = root_.path() + "/plain";
    view_ = root_.path() + "/view";
    copy_ = root_.path() + "/copy";
    fwd_ = root_.path() + "/fwd";
    pass_ = root_.path() + "/pass";
    for (const auto& d : {plain_, view_, copy_, fwd_}) ::mkdir(d.c_str(), 0700);
    write_file(pass_, "reverse password\n");
  }
  ~Reverse() override {
    for (const auto& m : {view_, fwd_}) run_shell("fusermount3 -u " + q(m) + " 2>/dev/null || fusermount3 -uz " + q(m) + " 2>/dev/null");
  }
  static std::string q(const std::string& s) { return shell_quote(s); }
  std::string bin() const { return test_binary(); }
  std::string log() const { return root_.path() + "/log"; }

  // A tree with every shape the format has: empty and chunk-boundary sizes, nested directories,
  // a long name, short and long symlink targets, a FIFO, odd characters.
  void populate() {
    ASSERT_EQ(::mkdir((plain_ + "/dir").c_str(), 0750), 0);
    ASSERT_EQ(::mkdir((plain_ + "/dir/deeper").c_str(), 0700), 0);
    const std::size_t sizes[] = {0, 1, 4095, 4096, 4097, 8192, 3 * 4096 + 5, 300000};
    for (std::size_t i = 0; i < std::size(sizes); ++i)
      write_file(plain_ + "/size-" + std::to_string(sizes[i]), pattern(sizes[i], static_cast<unsigned>(i + 1)));
    write_file(plain_ + "/dir/deeper/note with spaces \xc3\xa9", "deep\n");
    write_file(plain_ + "/dir/" + std::string(200, 'L'), "long name\n");
    ASSERT_EQ(::symlink("size-1", (plain_ + "/short-link").c_str()), 0);
    ASSERT_EQ(::symlink(std::string(4000, 'T').c_str(), (plain_ + "/dir/long-link").c_str()), 0);
    ASSERT_EQ(::mkfifo((plain_ + "/fifo").c_str(), 0600), 0);
    // A device node as root (as CI runs): shown, never opened.
    if (::geteuid() == 0) {
      ASSERT_EQ(::mknod((plain_ + "/dir/null-device").c_str(), S_IFCHR | 0600, makedev(1, 3)), 0);
    }
  }
  void init_reverse(const std::string& extra = "") {
    auto r = run_shell(bin() + " init --reverse --scrypt-logn 10 --passfile " + q(pass_) + " " + extra + " " + q(plain_));
    ASSERT_EQ(r.status, 0) << r.output;
  }
  CommandResult mount_reverse(const std::string& passfile = "", const std::string& extra = "") {
    return run_shell(bin() + " mount --reverse --engine " + test_engine() + transport_arg() + " --log " + q(log()) + " --passfile " +
                     q(passfile.empty() ? pass_ : passfile) + " " + extra + " " + q(plain_) + " " + q(view_));
  }
  void unmount(const std::string& m) { ASSERT_EQ(run_shell("fusermount3 -u " + q(m)).status, 0); }
  // Every path, type, size and link target under dir, and a hash of each regular file.
  std::string manifest(const std::string& dir) {
    auto r = run_shell("find . -printf '%y %s %p -> %l\\n' | sort && find . -type f -print0 | sort -z | "
                       "xargs -0r sha256sum",
                       dir);
    EXPECT_EQ(r.status, 0) << r.output;
    return r.output;
  }

  TempDir root_;
  std::string plain_, view_, copy_, fwd_, pass_;
};

TEST_F(Reverse, CopyOfTheViewMountsAsAVaultAndReadsBackByteForByte) {
  populate();
  init_reverse();
  auto r = mount_reverse();
  ASSERT_EQ(r.status, 0) << r.output;
  // The config is shown as gpucryptfs.conf; the reverse config itself is not.
  r = run_shell("ls -A", view_);
  EXPECT_NE(r.output.find("gpucryptfs.conf\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("gpucryptfs.diriv\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(".gpucryptfs.reverse.conf"), std::string::npos) << r.output;
  // Copied as a backup tool copies (the FIFO is made anew, never opened).
  r = run_shell("timeout 60 cp -a " + q(view_) + "/. " + q(copy_));
  ASSERT_EQ(r.status, 0) << r.output;
  if (have_program("rsync")) {  // and as rsync copies: the same bytes
    r = run_shell("timeout 60 rsync -a " + q(view_) + "/ " + q(root_.path() + "/rsynced"));
    ASSERT_EQ(r.status, 0) << r.output;
    r = run_shell("diff -r --no-dereference " + q(copy_) + " " + q(root_.path() + "/rsynced") +
                  " | grep -v 'is a fifo while file\\|is a character special file while file'");
    EXPECT_EQ(r.output, "") << "rsync and cp -a copied different views";
  }
  unmount(view_);

  r = run_shell(bin() + " mount --read-only --engine " + test_engine() + transport_arg() + " --log " + q(log()) + " --passfile " + q(pass_) +
                " " + q(copy_) + " " + q(fwd_));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_shell("diff -r --no-dereference -x .gpucryptfs.reverse.conf " + q(plain_) + " " + q(fwd_) +
                " | grep -v 'is a fifo while file\\|is a character special file while file'");
  EXPECT_EQ(r.output, "") << "the copy does not read back as PLAINDIR";
  run_shell("mv " + q(plain_ + "/.gpucryptfs.reverse.conf") + " " + q(root_.path()));
  EXPECT_EQ(manifest(fwd_), manifest(plain_));
  unmount(fwd_);
  r = run_shell(bin() + " fsck --passfile " + q(pass_) + " " + q(copy_));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(Reverse, EveryMountShowsTheSameBytesAndAChangeOnlyItsChunks) {
  populate();
  init_reverse();
  ASSERT_EQ(mount_reverse().status, 0);
  const std::string first = manifest(view_);
  unmount(view_);
  ASSERT_EQ(mount_reverse().status, 0);
  EXPECT_EQ(manifest(view_), first) << "two mounts of one PLAINDIR differ";
  ASSERT_EQ(run_shell("cp -a " + q(view_) + " before", root_.path()).status, 0);

  // One byte of chunk 1 of a four-chunk file, same size: that chunk alone changes.
  auto r = run_shell("printf Z | dd of=size-12293 bs=1 seek=5000 conv=notrunc status=none", plain_);
  ASSERT_EQ(r.status, 0) << r.output;
  ::sleep(2);  // past the kernel's attribute timeout
  // Its view file is the only one of 12429 bytes (24 + 4 * 28 + 12293).
  r = run_shell("f=$(cd before && find . -maxdepth 1 -size 12429c) && [ -n \"$f\" ] && cmp -l before/$f " + q(view_) +
                "/$f | awk '{print int(($1 - 1 - 24) / (4096 + 28))}' | sort -u",
                root_.path());
  EXPECT_EQ(r.output, "1\n") << "the chunks that changed are not just the one written";
  // The rest of the view is as before.
  r = run_shell("diff -r --no-dereference before " + q(view_) + " | grep -c differ", root_.path());
  EXPECT_EQ(r.output, "1\n") << r.output;
}

TEST_F(Reverse, WrongPasswordIsRefusedAndNothingIsMounted) {
  populate();
  init_reverse();
  write_file(root_.path() + "/wrong", "not the password\n");
  auto r = mount_reverse(root_.path() + "/wrong");
  EXPECT_EQ(r.status, 12) << r.output;
  EXPECT_NE(run_shell("mountpoint -q " + q(view_)).status, 0) << "a mount with the wrong password was made";
  // The right one opens it; the view is read-only.
  r = mount_reverse();
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_shell("touch new-file", view_);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("Read-only"), std::string::npos) << r.output;
}

TEST_F(Reverse, RefusesAMountpointInsidePlaindirAndASecondInit) {
  populate();
  init_reverse();
  ASSERT_EQ(::mkdir((plain_ + "/mnt").c_str(), 0700), 0);
  auto r = run_shell(bin() + " mount --reverse --passfile " + q(pass_) + " " + q(plain_) + " " + q(plain_ + "/mnt"));
  EXPECT_EQ(r.status, 10) << r.output;
  r = run_shell(bin() + " init --reverse --scrypt-logn 10 --passfile " + q(pass_) + " " + q(plain_));
  EXPECT_EQ(r.status, 6) << r.output;
  EXPECT_NE(r.output.find("exists already"), std::string::npos) << r.output;
  r = run_shell(bin() + " mount --reverse --passfile " + q(pass_) + " " + q(root_.path()) + " " + q(view_));
  EXPECT_EQ(r.status, 23) << "a folder without a reverse config: " << r.output;
}

// The view, served to every user, shows each node as what it was looked up as: a user who owns a
// folder in PLAINDIR and puts another user's folder in its place between the lookup (whose
// attributes the kernel checks permissions against) and the open gets ESTALE, never that user's
// 0600 file's ciphertext or size through a node of his own.
TEST_F(Reverse, AFolderSwappedInAfterTheLookupIsNeverOpenedThroughTheOldNode) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the view is served to another user";
  constexpr uid_t kAttacker = 65534, kVictim = 4242;
  for (const auto& d : {root_.path(), plain_, view_}) ASSERT_EQ(::chmod(d.c_str(), 0755), 0);
  const std::string shared = plain_ + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chown(shared.c_str(), kAttacker, kAttacker), 0);
  for (const auto& [dir, owner, text] : {std::tuple{std::string("x"), kAttacker, std::string(100, 'm')},
                                         std::tuple{std::string("v"), kVictim, std::string(100, 'V')}}) {
    const std::string d = shared + "/" + dir;
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
    write_file(d + "/secret", text);
    ASSERT_EQ(::chmod((d + "/secret").c_str(), owner == kVictim ? 0600 : 0644), 0);
    ASSERT_EQ(::chown((d + "/secret").c_str(), owner, owner), 0);
    ASSERT_EQ(::chown(d.c_str(), owner, owner), 0);
  }
  init_reverse();
  auto r = mount_reverse("", "--allow-other");
  ASSERT_EQ(r.status, 0) << r.output;
  // The view's path of shared/x/secret: the one directory under shared's view that the attacker owns.
  const std::string find = "find " + q(view_) + " -mindepth 3 -maxdepth 3 -type f ! -name gpucryptfs.diriv -uid " + std::to_string(kAttacker);
  r = run_shell(find);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string path = r.output.substr(0, r.output.find('\n'));
  ASSERT_FALSE(path.empty()) << run_shell("find " + q(view_) + " -ls").output;
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kAttacker, kAttacker, kAttacker) != 0 ||
        ::setresuid(kAttacker, kAttacker, kAttacker) != 0)
      ::_exit(10);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) ::_exit(11);  // the lookup, as his own file
    if (::rename((shared + "/x").c_str(), (shared + "/old").c_str()) != 0) ::_exit(12);
    if (::rename((shared + "/v").c_str(), (shared + "/x").c_str()) != 0) ::_exit(13);
    const int fd = ::open(path.c_str(), O_RDONLY);
    const std::string said = fd >= 0 ? "opened" : std::strerror(errno);
    if (fd >= 0) ::close(fd);
    if (::write(p[1], said.data(), said.size()) < 0) ::_exit(14);
    ::_exit(0);
  }
  ::close(p[1]);
  std::string said;
  char buf[256];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) said.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "10: no setuid; 11: lookup; 12, 13: the swap";
  EXPECT_TRUE(said == std::strerror(ESTALE) || said == std::strerror(EACCES))
      << "the attacker's open of his old node: " << said;
  unmount(view_);
}

}  // namespace
}  // namespace gcfs::test
