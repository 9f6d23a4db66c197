// The directory-mode mount driven through system calls: every operation a user expects, checked
// for its plaintext behaviour and, where it matters, for what lands in CIPHERDIR.
#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

std::set<std::string> list_dir(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.insert(n);
  }
  ::closedir(d);
  return out;
}

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

class FsOps : public ::testing::Test {
 protected:
  // 4 KiB chunks make every chunk boundary cheap to cross.
  FsOps() : v_(small_chunks()) {}
  static VaultOptions small_chunks() {
    VaultOptions o;
    o.chunk_size = 4096;
    return o;
  }
  MountedVault v_;
};

TEST_F(FsOps, FilesAndDirectoriesSurviveRemount) {
  ASSERT_EQ(::mkdir(v_.path("dir").c_str(), 0750), 0);
  ASSERT_EQ(::mkdir(v_.path("dir/sub").c_str(), 0700), 0);
  write_file(v_.path("dir/sub/file"), "contents");
  write_file(v_.path("empty"), "");
  const std::string big = pattern(3 * 4096 + 17, 1);
  write_file(v_.path("big"), big);
  EXPECT_EQ(list_dir(v_.mountpoint()), (std::set<std::string>{"dir", "empty", "big"}));
  v_.remount();
  EXPECT_EQ(list_dir(v_.mountpoint()), (std::set<std::string>{"dir", "empty", "big"}));
  EXPECT_EQ(read_file(v_.path("dir/sub/file")), "contents");
  EXPECT_EQ(read_file(v_.path("empty")), "");
  EXPECT_EQ(read_file(v_.path("big")), big);
  struct stat st {};
  ASSERT_EQ(::stat(v_.path("big").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(big.size()));
  ASSERT_EQ(::stat(v_.path("dir").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

TEST_F(FsOps, UnlinkAndRmdir) {
  ASSERT_EQ(::mkdir(v_.path("d").c_str(), 0755), 0);
  write_file(v_.path("d/f"), "x");
  EXPECT_EQ(::rmdir(v_.path("d").c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY);
  ASSERT_EQ(::unlink(v_.path("d/f").c_str()), 0);
  EXPECT_EQ(::rmdir(v_.path("d").c_str()), 0) << "a directory holding only its IV file is empty";
  EXPECT_TRUE(list_dir(v_.mountpoint()).empty());
  // Only the vault's own files remain in CIPHERDIR (the crash journal is created by a read-write mount).
  EXPECT_EQ(list_dir(v_.cipherdir()), (std::set<std::string>{"gpucryptfs.conf", "gpucryptfs.diriv", "gpucryptfs.journal"}));
  EXPECT_EQ(::unlink(v_.path("nothing").c_str()), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(FsOps, RmdirRemovesAnIvTemporaryLeftByACrash) {
  ASSERT_EQ(::mkdir(v_.path("d").c_str(), 0755), 0);
  std::set<std::string> before = list_dir(v_.cipherdir());
  std::string stored;
  for (const auto& n : before)
    if (n.find('.') == std::string::npos) stored = n;
  ASSERT_FALSE(stored.empty()) << "the new directory's stored name";
  // What a crash between writing a new IV and renaming it into place leaves behind.
  write_file(v_.cipherdir() + "/" + stored + "/gpucryptfs.diriv.tmp", "0123456789abcdef");
  EXPECT_TRUE(list_dir(v_.path("d")).empty()) << "the leftover is ours and hidden";
  EXPECT_EQ(::rmdir(v_.path("d").c_str()), 0) << std::strerror(errno);
  EXPECT_EQ(list_dir(v_.cipherdir()), (std::set<std::string>{"gpucryptfs.conf", "gpucryptfs.diriv", "gpucryptfs.journal"}));
}

TEST_F(FsOps, ReadOnlyDirectoryModeStillGetsItsIv) {
  ASSERT_EQ(::mkdir(v_.path("ro").c_str(), 0500), 0);
  struct stat st {};
  ASSERT_EQ(::stat(v_.path("ro").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0500u);
  EXPECT_TRUE(list_dir(v_.path("ro")).empty());
}

// A rewrite of fsynced bytes is journaled with the file's path under CIPHERDIR (what recovery
// after a SIGKILL opens); the daemon keeps that path between writes, so a rename through the mount,
// here of the directory above an open file, must make the next record carry the new path.
TEST_F(FsOps, JournalRecordsCarryThePathAfterARenameAbove) {
  ASSERT_EQ(::mkdir(v_.path("d").c_str(), 0755), 0);
  int fd = ::open(v_.path("d/x").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  const std::string data(8192, 'q');
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::fsync(fd), 0);
  auto slot0_path = [&] {
    std::string h(4096, '\0');
    int jfd = ::open((v_.cipherdir() + "/gpucryptfs.journal").c_str(), O_RDONLY);
    EXPECT_GE(jfd, 0);
    EXPECT_EQ(::pread(jfd, h.data(), h.size(), 0), static_cast<ssize_t>(h.size()));
    ::close(jfd);
    const auto* u = reinterpret_cast<const unsigned char*>(h.data());
    const std::size_t len = std::size_t{u[12]} << 24 | std::size_t{u[13]} << 16 | std::size_t{u[14]} << 8 | u[15];
    return h.substr(120, len);
  };
  auto cipher_path = [&] {  // the one directory, and the one file in it
    std::string dir, file;
    for (const auto& e : list_dir(v_.cipherdir()))
      if (e.rfind("gpucryptfs.", 0) != 0) dir = e;
    for (const auto& e : list_dir(v_.cipherdir() + "/" + dir))
      if (e.rfind("gpucryptfs.", 0) != 0) file = e;
    return dir + "/" + file;
  };
  ASSERT_EQ(::pwrite(fd, "ab", 2, 100), 2);
  ASSERT_EQ(::fsync(fd), 0);
  const std::string before = cipher_path();
  EXPECT_EQ(slot0_path(), before);
  ASSERT_EQ(::rename(v_.path("d").c_str(), v_.path("e").c_str()), 0);
  ASSERT_EQ(::pwrite(fd, "cd", 2, 200), 2);
  ASSERT_EQ(::fsync(fd), 0);
  const std::string after = cipher_path();
  EXPECT_NE(after, before);
  EXPECT_EQ(slot0_path(), after);
  ::close(fd);
}

TEST_F(FsOps, RenameReplaceNoreplaceAndExchange) {
  write_file(v_.path("a"), "A");
  write_file(v_.path("b"), "B");
  ASSERT_EQ(::renameat2(AT_FDCWD, v_.path("a").c_str(), AT_FDCWD, v_.path("b").c_str(), RENAME_NOREPLACE), -1);
  EXPECT_EQ(errno, EEXIST);
  ASSERT_EQ(::renameat2(AT_FDCWD, v_.path("a").c_str(), AT_FDCWD, v_.path("b").c_str(), RENAME_EXCHANGE), 0);
  EXPECT_EQ(read_file(v_.path("a")), "B");
  EXPECT_EQ(read_file(v_.path("b")), "A");
  ASSERT_EQ(::rename(v_.path("a").c_str(), v_.path("b").c_str()), 0);
  EXPECT_EQ(read_file(v_.path("b")), "B");
  EXPECT_EQ(list_dir(v_.mountpoint()), (std::set<std::string>{"b"}));
  ASSERT_EQ(::mkdir(v_.path("d1").c_str(), 0755), 0);
  write_file(v_.path("d1/inner"), "in");
  ASSERT_EQ(::rename(v_.path("d1").c_str(), v_.path("d2").c_str()), 0);
  ASSERT_EQ(::mkdir(v_.path("d3").c_str(), 0755), 0);
  ASSERT_EQ(::rename(v_.path("d2").c_str(), v_.path("d3/moved").c_str()), 0);
  v_.remount();
  EXPECT_EQ(read_file(v_.path("d3/moved/inner")), "in");
}

TEST_F(FsOps, RenameReplacesAnEmptyDirectoryOnly) {
  ASSERT_EQ(::mkdir(v_.path("src").c_str(), 0755), 0);
  write_file(v_.path("src/f"), "moved");
  ASSERT_EQ(::mkdir(v_.path("empty").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(v_.path("full").c_str(), 0755), 0);
  write_file(v_.path("full/g"), "stays");
  EXPECT_EQ(::rename(v_.path("src").c_str(), v_.path("full").c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY);
  EXPECT_EQ(::rename(v_.path("src").c_str(), v_.path("empty").c_str()), 0) << std::strerror(errno);
  v_.remount();
  EXPECT_EQ(read_file(v_.path("empty/f")), "moved");
  EXPECT_EQ(read_file(v_.path("full/g")), "stays");
  write_file(v_.path("full/h"), "still writable: the IV is back");
  EXPECT_EQ(list_dir(v_.path("full")), (std::set<std::string>{"g", "h"}));
}

TEST_F(FsOps, LongNamesAtTheBoundaryCreateRenameAndUnlink) {
  const std::string n175(175, 's'), n176(176, 'l'), n255(255, 'z');
  write_file(v_.path(n175), "short form");
  write_file(v_.path(n176), "long form");
  ASSERT_EQ(::mkdir(v_.path(n255).c_str(), 0755), 0);
  write_file(v_.path(n255 + "/" + n255), "deep");
  EXPECT_EQ(list_dir(v_.mountpoint()), (std::set<std::string>{n175, n176, n255}));
  // Long -> long, long -> short, short -> long.
  ASSERT_EQ(::rename(v_.path(n176).c_str(), v_.path(std::string(200, 'r')).c_str()), 0);
  ASSERT_EQ(::rename(v_.path(std::string(200, 'r')).c_str(), v_.path("s").c_str()), 0);
  ASSERT_EQ(::rename(v_.path(n175).c_str(), v_.path(std::string(254, 'q')).c_str()), 0);
  v_.remount();
  EXPECT_EQ(list_dir(v_.mountpoint()), (std::set<std::string>{"s", std::string(254, 'q'), n255}));
  EXPECT_EQ(read_file(v_.path("s")), "long form");
  EXPECT_EQ(read_file(v_.path(n255 + "/" + n255)), "deep");
  ASSERT_EQ(::unlink(v_.path(std::string(254, 'q')).c_str()), 0);
  ASSERT_EQ(::unlink(v_.path(n255 + "/" + n255).c_str()), 0);
  ASSERT_EQ(::rmdir(v_.path(n255).c_str()), 0);
  ASSERT_EQ(::unlink(v_.path("s").c_str()), 0);
  // No .name file is left behind.
  EXPECT_EQ(list_dir(v_.cipherdir()), (std::set<std::string>{"gpucryptfs.conf", "gpucryptfs.diriv", "gpucryptfs.journal"}));
  EXPECT_EQ(::open(v_.path(std::string(256, 'x')).c_str(), O_CREAT | O_WRONLY, 0644), -1);
  EXPECT_EQ(errno, ENAMETOOLONG);
}

TEST_F(FsOps, HardLinksShareContent) {
  write_file(v_.path("orig"), "one");
  ASSERT_EQ(::link(v_.path("orig").c_str(), v_.path("alias").c_str()), 0);
  const std::string long_alias(230, 'h');
  ASSERT_EQ(::link(v_.path("orig").c_str(), v_.path(long_alias).c_str()), 0);
  write_file(v_.path("alias"), "two, longer");
  EXPECT_EQ(read_file(v_.path("orig")), "two, longer");
  struct stat a {}, b {};
  ASSERT_EQ(::stat(v_.path("orig").c_str(), &a), 0);
  ASSERT_EQ(::stat(v_.path(long_alias).c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(a.st_nlink, 3u);
  // Renaming one hard link onto another of the same file changes nothing (POSIX): both stay.
  const std::string long_alias2(240, 'k');
  ASSERT_EQ(::link(v_.path(long_alias).c_str(), v_.path(long_alias2).c_str()), 0);
  ASSERT_EQ(::rename(v_.path(long_alias).c_str(), v_.path(long_alias2).c_str()), 0);
  ASSERT_EQ(::unlink(v_.path("orig").c_str()), 0);
  v_.remount();
  EXPECT_EQ(read_file(v_.path(long_alias)), "two, longer");
  EXPECT_EQ(read_file(v_.path(long_alias2)), "two, longer");
}

TEST_F(FsOps, SymlinksAreEncryptedAndResolve) {
  write_file(v_.path("target-file"), "through the link");
  ASSERT_EQ(::symlink("target-file", v_.path("link").c_str()), 0);
  ASSERT_EQ(::symlink("/nonexistent/absolute/target", v_.path("dangling").c_str()), 0);
  char buf[256];
  ssize_t n = ::readlink(v_.path("link").c_str(), buf, sizeof buf);
  ASSERT_EQ(std::string(buf, static_cast<std::size_t>(n)), "target-file");
  EXPECT_EQ(read_file(v_.path("link")), "through the link");
  struct stat st {};
  ASSERT_EQ(::lstat(v_.path("dangling").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(st.st_size, static_cast<off_t>(std::string("/nonexistent/absolute/target").size()));
  auto r = run_shell("grep -r nonexistent . ; find . -lname '*target*'", v_.cipherdir());
  EXPECT_EQ(r.output, "") << "a symlink target reached CIPHERDIR in the clear";
}

std::string read_link(const std::string& path) {
  std::string buf(8192, '\0');
  ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
  if (n < 0) return "error: " + std::string(std::strerror(errno));
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

// A link target of `n` bytes, a path of 200-byte components (each within NAME_MAX).
std::string long_target(std::size_t n, char fill) {
  std::string t(n, fill);
  for (std::size_t i = 200; i < n; i += 201) t[i] = '/';
  return t;
}

// In CIPHERDIR: how many long-target files the symlinks hold (each looked for beside its link,
// MISSING when not there), and how many long-target files there are.
constexpr const char* kLongTargetFiles =
    "n=$(find . -type l | while read -r l; do t=$(readlink \"$l\"); case $t in gcfs.longtarget.*) "
    "d=$(dirname \"$l\"); if [ -f \"$d/$t\" ]; then echo \"$d/$t\"; else echo MISSING; fi;; esac; done | sort -u | "
    "wc -l); echo $n $(find . -name 'gcfs.longtarget.*' | wc -l)";

// Targets up to 4095 bytes (ext4's limit) work, also those whose encoded form is too long for a
// link on the backing filesystem: they live in a gcfs.longtarget.* file beside the link.
TEST_F(FsOps, LongSymlinkTargetsUpTo4095Bytes) {
  ASSERT_EQ(::mkdir(v_.path("d").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(v_.path("e").c_str(), 0755), 0);
  const std::string t4095 = long_target(4095, 'a'), t3043 = long_target(3043, 'b'), t3044 = long_target(3044, 'c');
  ASSERT_EQ(::symlink(t4095.c_str(), v_.path("d/max").c_str()), 0) << std::strerror(errno);
  ASSERT_EQ(::symlink(t3043.c_str(), v_.path("d/short").c_str()), 0) << std::strerror(errno);
  ASSERT_EQ(::symlink(t3044.c_str(), v_.path("d/long").c_str()), 0) << std::strerror(errno);
  EXPECT_EQ(read_link(v_.path("d/max")), t4095);
  EXPECT_EQ(read_link(v_.path("d/short")), t3043);
  EXPECT_EQ(read_link(v_.path("d/long")), t3044);
  struct stat st {};
  ASSERT_EQ(::lstat(v_.path("d/max").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 4095);
  // 4096 bytes is one more than a link target may be.
  const std::string t4096(4096, 'x');
  EXPECT_NE(::symlink(t4096.c_str(), v_.path("d/toolong").c_str()), 0);
  EXPECT_EQ(errno, ENAMETOOLONG);
  // Only the two long ones have a file, named after the hash of their encoded target.
  auto r = run_shell(kLongTargetFiles, v_.cipherdir());
  EXPECT_EQ(r.output, "2 2\n");
  r = run_shell("grep -rl aaaaaaaaaa . ; true", v_.cipherdir());
  EXPECT_EQ(r.output, "") << "a long target reached CIPHERDIR in the clear";

  // A hard link and a rename into another directory take the file along; the last name gone,
  // so is the file.
  ASSERT_EQ(::link(v_.path("d/max").c_str(), v_.path("e/max-link").c_str()), 0) << std::strerror(errno);
  ASSERT_EQ(::rename(v_.path("d/long").c_str(), v_.path("e/long").c_str()), 0) << std::strerror(errno);
  v_.remount();
  EXPECT_EQ(read_link(v_.path("d/max")), t4095);
  EXPECT_EQ(read_link(v_.path("e/max-link")), t4095);
  EXPECT_EQ(read_link(v_.path("e/long")), t3044);
  EXPECT_EQ(list_dir(v_.path("d")), (std::set<std::string>{"max", "short"}));
  ASSERT_EQ(::unlink(v_.path("d/max").c_str()), 0);
  EXPECT_EQ(read_link(v_.path("e/max-link")), t4095);
  r = run_shell(kLongTargetFiles, v_.cipherdir());
  EXPECT_EQ(r.output, "2 2\n") << "a long target's file was left behind or lost";
  // An exchange across directories, a rename within one, and a long link replacing another.
  ASSERT_EQ(::renameat2(AT_FDCWD, v_.path("e/long").c_str(), AT_FDCWD, v_.path("d/short").c_str(), RENAME_EXCHANGE), 0);
  EXPECT_EQ(read_link(v_.path("d/short")), t3044);
  EXPECT_EQ(read_link(v_.path("e/long")), t3043);
  ASSERT_EQ(::rename(v_.path("d/short").c_str(), v_.path("d/renamed").c_str()), 0);
  ASSERT_EQ(::symlink(t4095.c_str(), v_.path("d/other").c_str()), 0);
  ASSERT_EQ(::rename(v_.path("d/other").c_str(), v_.path("d/renamed").c_str()), 0);
  EXPECT_EQ(read_link(v_.path("d/renamed")), t4095);
  EXPECT_EQ(read_link(v_.path("e/max-link")), t4095);
  r = run_shell(kLongTargetFiles, v_.cipherdir());
  EXPECT_EQ(r.output, "2 2\n") << "a long target's file was left behind or lost";
  v_.unmount();
  r = run_shell(v_.binary() + " fsck --passfile " + shell_quote(v_.passfile()) + " " + shell_quote(v_.cipherdir()));
  EXPECT_EQ(r.status, 0) << r.output;

  // Every long target's file edited (one byte replaced by another): a link with a file reads as
  // EIO, a short one beside it still reads, and fsck names the damage.
  r = run_shell("for f in $(find . -name 'gcfs.longtarget.*'); do chmod 600 \"$f\" && "
                "c=$(dd if=\"$f\" bs=1 skip=100 count=1 status=none) && "
                "if [ \"$c\" = A ]; then n=B; else n=A; fi && "
                "printf $n | dd of=\"$f\" bs=1 seek=100 conv=notrunc status=none || exit 1; done",
                v_.cipherdir());
  ASSERT_EQ(r.status, 0) << r.output;
  v_.mount();
  EXPECT_EQ(read_link(v_.path("e/max-link")), "error: " + std::string(std::strerror(EIO)));
  EXPECT_EQ(read_link(v_.path("e/long")), t3043);
  v_.unmount();
  r = run_shell(v_.binary() + " fsck --passfile " + shell_quote(v_.passfile()) + " " + shell_quote(v_.cipherdir()));
  EXPECT_EQ(r.status, 26) << r.output;
  EXPECT_NE(r.output.find("does not match its hash"), std::string::npos) << r.output;
}

TEST_F(FsOps, FifoWorks) {
  ASSERT_EQ(::mkfifo(v_.path("pipe").c_str(), 0600), 0);
  struct stat st {};
  ASSERT_EQ(::stat(v_.path("pipe").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  auto r = v_.sh("(echo through-fifo > pipe &) ; cat pipe");
  EXPECT_EQ(r.output, "through-fifo\n");
}

// A fifo opened and then unlinked (`mkfifo f; exec 3<>f; rm f`) still answers fstat and fchmod:
// FUSE never sees fifo opens, so only a descriptor taken at the unlink keeps it reachable. The
// same holds for the times the kernel flushes after unlinking, or replacing by rename, a file it
// wrote: none of this is an error, and none of it is logged as one.
TEST_F(FsOps, UnlinkedButStillUsedInodesKeepAnswering) {
  const std::string p = v_.path("fifo");
  ASSERT_EQ(::mkfifo(p.c_str(), 0640), 0);
  int fd = ::open(p.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::unlink(p.c_str()), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  ASSERT_EQ(::fchmod(fd, 0600), 0) << std::strerror(errno);
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::write(fd, "ok", 2), 2);
  char buf[2];
  ASSERT_EQ(::read(fd, buf, 2), 2);
  ::close(fd);

  for (int i = 0; i < 20; ++i) {
    const std::string f = v_.path("tmp" + std::to_string(i));
    fd = ::open(f.c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "temporary", 9), 9);
    ::close(fd);
    if (i % 2) ASSERT_EQ(::unlink(f.c_str()), 0);
    else ASSERT_EQ(::rename(f.c_str(), v_.path("kept").c_str()), 0);  // replaces the last one
  }
  v_.unmount();  // the log is complete once the daemon is gone
  const std::string log = v_.log();
  EXPECT_EQ(log.find("warning"), std::string::npos) << log;
  EXPECT_EQ(log.find("error"), std::string::npos) << log;
}

TEST_F(FsOps, ExtendedAttributes) {
  write_file(v_.path("f"), "x");
  const std::string p = v_.path("f");
  ASSERT_EQ(::setxattr(p.c_str(), "user.colour", "blue-marker", 11, 0), 0) << std::strerror(errno);
  ASSERT_EQ(::setxattr(p.c_str(), "user.empty", "", 0, 0), 0);
  char buf[256];
  ssize_t n = ::getxattr(p.c_str(), "user.colour", buf, sizeof buf);
  ASSERT_EQ(n, 11);
  EXPECT_EQ(std::string(buf, 11), "blue-marker");
  EXPECT_EQ(::getxattr(p.c_str(), "user.colour", nullptr, 0), 11);
  EXPECT_EQ(::getxattr(p.c_str(), "user.colour", buf, 3), -1);
  EXPECT_EQ(errno, ERANGE);
  EXPECT_EQ(::setxattr(p.c_str(), "user.colour", "red", 3, XATTR_CREATE), -1);
  EXPECT_EQ(errno, EEXIST);
  n = ::listxattr(p.c_str(), buf, sizeof buf);
  ASSERT_GT(n, 0);
  std::set<std::string> names;
  for (ssize_t i = 0; i < n; i += static_cast<ssize_t>(std::strlen(buf + i)) + 1) names.insert(buf + i);
  EXPECT_EQ(names, (std::set<std::string>{"user.colour", "user.empty"}));
  ASSERT_EQ(::removexattr(p.c_str(), "user.colour"), 0);
  EXPECT_EQ(::getxattr(p.c_str(), "user.colour", buf, sizeof buf), -1);
  EXPECT_EQ(errno, ENODATA);
  // Other namespaces are stored the same way (tests/integration_posix_acl_test.cc); a name in none
  // of them is refused.
  EXPECT_EQ(::setxattr(p.c_str(), "trusted.colour", "blue-marker", 11, 0), 0) << std::strerror(errno);
  EXPECT_EQ(::setxattr(p.c_str(), "system.colour", "v", 1, 0), -1);
  auto r = run_shell("getfattr -d -R . 2>/dev/null | grep -c -e colour -e blue-marker", v_.cipherdir());
  EXPECT_EQ(r.output, "0\n") << "an xattr name or value reached CIPHERDIR in the clear";
}

TEST_F(FsOps, TruncateUpMakesHolesAndDownCuts) {
  const std::string p = v_.path("t");
  write_file(p, "head");
  ASSERT_EQ(::truncate(p.c_str(), 3 * 4096 + 5), 0);
  std::string want = "head" + std::string(3 * 4096 + 1, '\0');
  EXPECT_EQ(read_file(p), want);
  ASSERT_EQ(::truncate(p.c_str(), 4096 + 2), 0);
  EXPECT_EQ(read_file(p), want.substr(0, 4096 + 2));
  ASSERT_EQ(::truncate(p.c_str(), 2), 0);
  EXPECT_EQ(read_file(p), "he");
  ASSERT_EQ(::truncate(p.c_str(), 0), 0);
  EXPECT_EQ(read_file(p), "");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  // Writing far past the end leaves a hole that reads as zeros.
  int fd = ::open(p.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "tail", 4, 10 * 4096 + 3), 4);
  ::close(fd);
  v_.remount();
  std::string got = read_file(p);
  ASSERT_EQ(got.size(), 10u * 4096 + 7);
  EXPECT_EQ(got.substr(0, 10 * 4096 + 3), std::string(10 * 4096 + 3, '\0'));
  EXPECT_EQ(got.substr(10 * 4096 + 3), "tail");
}

TEST_F(FsOps, FallocateExtendsAndPunchesHoles) {
  const std::string p = v_.path("fa");
  const std::string data = pattern(5 * 4096, 9);
  write_file(p, data);
  int fd = ::open(p.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000, 2 * 4096), 0) << std::strerror(errno);
  ASSERT_EQ(::fallocate(fd, 0, 0, 6 * 4096), 0) << std::strerror(errno);
  ::close(fd);
  std::string want = data;
  std::fill(want.begin() + 1000, want.begin() + 1000 + 2 * 4096, '\0');
  want.resize(6 * 4096, '\0');
  EXPECT_EQ(read_file(p), want);
}

TEST_F(FsOps, AppendAlwaysWritesAtTheEnd) {
  const std::string p = v_.path("log");
  for (int i = 0; i < 50; ++i) {
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ASSERT_GE(fd, 0);
    std::string line = "line " + std::to_string(i) + " " + std::string(static_cast<std::size_t>(i * 37), '.') + "\n";
    ASSERT_EQ(::pwrite(fd, line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
    ::close(fd);
  }
  auto r = v_.sh("wc -l < log; head -1 log; tail -1 log | cut -c1-8");
  EXPECT_EQ(r.output, "50\nline 0 \nline 49 \n");
}

// Without the writeback cache the daemon places O_APPEND writes itself. Pages dirtied through a
// mapping come back as writes from the page cache, possibly through an O_APPEND handle, and
// belong where the page is, not at the end.
TEST(AppendWithoutWritebackCache, MappedPagesWrittenThroughAnAppendHandleStayInPlace) {
  VaultOptions o;
  o.chunk_size = 4096;
  // The default; drop a suite-wide --writeback-cache (GPUCRYPTFS_TEST_MOUNT_ARGS).
  o.mount_args.erase(std::remove(o.mount_args.begin(), o.mount_args.end(), "--writeback-cache"), o.mount_args.end());
  MountedVault v(o);
  const std::string p = v.path("log");
  const std::size_t size = 3 * 4096 + 100;
  std::string want = pattern(size, 9);
  int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, want.data(), size), static_cast<ssize_t>(size));
  void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED);
  std::memcpy(static_cast<char*>(m) + 4000, "MAPPED", 6);
  want.replace(4000, 6, "MAPPED");
  ASSERT_EQ(::msync(m, size, MS_SYNC), 0);
  ::munmap(m, size);
  ASSERT_EQ(::write(fd, "tail", 4), 4);  // write(2) on the handle still appends
  want += "tail";
  ::close(fd);
  std::string got = read_file(p);
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "the mapped bytes did not stay at their offset";
  v.remount();
  got = read_file(p);
  EXPECT_TRUE(got == want) << "after remount: " << got.size() << " bytes, want " << want.size();
}

TEST_F(FsOps, ModesOwnersTimesAndStatfs) {
  const std::string p = v_.path("m");
  write_file(p, "x");
  ASSERT_EQ(::chmod(p.c_str(), 0604), 0);
  ASSERT_EQ(::chown(p.c_str(), 1234, 5678), 0);
  timespec ts[2] = {{1000000000, 0}, {1234567890, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0);
  ASSERT_EQ(::symlink("m", v_.path("lm").c_str()), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, v_.path("lm").c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << std::strerror(errno);
  v_.remount();
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0604u);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1234567890);
  struct statvfs sv {};
  ASSERT_EQ(::statvfs(v_.mountpoint().c_str(), &sv), 0);
  EXPECT_EQ(sv.f_namemax, 255u);
  EXPECT_GT(sv.f_blocks, 0u);
}

TEST_F(FsOps, FsyncAndFsyncdir) {
  int fd = ::open(v_.path("s").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  EXPECT_EQ(::fsync(fd), 0);
  EXPECT_EQ(::fdatasync(fd), 0);
  ::close(fd);
  int dfd = ::open(v_.mountpoint().c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dfd, 0);
  EXPECT_EQ(::fsync(dfd), 0);
  ::close(dfd);
}

TEST_F(FsOps, WriteOnlyHandleRewritesPartialChunks) {
  const std::string p = v_.path("wo");
  const std::string data = pattern(3 * 4096, 4);
  write_file(p, data);
  int fd = ::open(p.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "XY", 2, 4095), 2);
  ::close(fd);
  std::string want = data;
  want[4095] = 'X';
  want[4096] = 'Y';
  EXPECT_EQ(read_file(p), want);
}

TEST_F(FsOps, ManyEntriesList) {
  for (int i = 0; i < 300; ++i) write_file(v_.path("f" + std::to_string(i)), std::to_string(i));
  EXPECT_EQ(list_dir(v_.mountpoint()).size(), 300u);
  auto r = v_.sh("rm -r ./* && ls -A | wc -l");
  EXPECT_EQ(r.output, "0\n");
}

// The daemon keeps a descriptor for every directory the kernel remembers (and caches some of
// files), so a tree with more entries than the descriptor limit it was started with (1024 is the
// usual soft limit; unpacking a source tree passes it easily) must still be created, listed and
// removed.
TEST(ManyEntries, TreeLargerThanTheStartingDescriptorLimit) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 4096) GTEST_SKIP() << "hard descriptor limit below 4096";
  rlimit low{256, saved.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::unique_ptr<MountedVault> v;
  try {
    v = std::make_unique<MountedVault>();  // the daemon starts with a soft limit of 256
  } catch (...) {
    ::setrlimit(RLIMIT_NOFILE, &saved);
    throw;
  }
  ::setrlimit(RLIMIT_NOFILE, &saved);
  auto made = v->sh("for d in $(seq 8); do mkdir d$d && for f in $(seq 150); do echo $d.$f > d$d/f$f || exit 1; done; done");
  ASSERT_EQ(made.status, 0) << made.output;
  auto listed = v->sh("ls -lR . | grep -c '^-'");
  EXPECT_EQ(listed.status, 0) << listed.output;
  EXPECT_EQ(listed.output, "1200\n");
  auto removed = v->sh("rm -rf d*");
  EXPECT_EQ(removed.status, 0) << removed.output;
  EXPECT_TRUE(list_dir(v->mountpoint()).empty());
}

// No inode holds a descriptor for its whole life (tests/integration_fd_cache_test.cc): directories,
// like other files, are cached up to a budget and opened again by name beyond it. So a hard limit
// far below the number of directories the kernel remembers still serves them all.
TEST(ManyEntries, MoreDirectoriesThanTheDescriptorLimit) {
  VaultOptions o;
  o.shell_prefix = "ulimit -n 200 && ";  // soft and hard: the daemon cannot raise it
  MountedVault v(o);
  auto files = v.sh("for f in $(seq 400); do echo $f > f$f || exit 1; done; ls -l | grep -c '^-'");
  EXPECT_EQ(files.status, 0) << files.output;
  EXPECT_EQ(files.output, "400\n");
  auto dirs = v.sh("for d in $(seq 400); do mkdir d$d && echo $d > d$d/f || exit 1; done; ls -l | grep -c '^d'; "
                   "cat d*/f | wc -l");
  EXPECT_EQ(dirs.status, 0) << dirs.output;
  EXPECT_EQ(dirs.output, "400\n400\n");
  EXPECT_EQ(v.log().find("out of file descriptors"), std::string::npos) << v.log();
}

}  // namespace
}  // namespace gcfs::test
