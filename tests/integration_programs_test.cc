// Ordinary programs at work inside a mount: what a person does with a folder every day.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

class Programs : public ::testing::Test {
 protected:
  MountedVault v_;
  TempDir plain_{"gcfs-plain"};  // an ordinary folder to compare with

  // Fills dir with a small tree: nested folders, a big and an empty file, a symlink, odd names.
  void make_tree(const std::string& dir) {
    auto r = run_shell(
        "mkdir -p a/b/c 'with space' && echo hello > a/b/c/deep.txt && : > empty && "
        "head -c 300000 /dev/urandom > a/random.bin && ln -s a/b/c/deep.txt link && "
        "printf 'x' > 'with space/ünïcödé name' && chmod 640 a/random.bin && touch -d 2001-02-03 empty",
        dir);
    ASSERT_EQ(r.status, 0) << r.output;
  }
};

TEST_F(Programs, CpArchiveRoundTrip) {
  make_tree(plain_.path());
  auto r = run_shell("cp -a " + shell_quote(plain_.path()) + "/. " + shell_quote(v_.path("copy")) + " && diff -r " +
                     shell_quote(plain_.path()) + " " + shell_quote(v_.path("copy")) + " && stat -c '%a %Y' " +
                     shell_quote(v_.path("copy/a/random.bin")) + " " + shell_quote(v_.path("copy/empty")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.substr(0, 4), "640 ");
  v_.remount();
  r = run_shell("diff -r " + shell_quote(plain_.path()) + " " + shell_quote(v_.path("copy")));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(Programs, TarInAndOut) {
  make_tree(plain_.path());
  auto r = run_shell("tar -C " + shell_quote(plain_.path()) + " -cf - . | tar -C " + shell_quote(v_.mountpoint()) +
                     " -xpf - && tar -C " + shell_quote(v_.mountpoint()) + " -czf " + shell_quote(v_.path("self.tgz")) +
                     " a 'with space' && mkdir back && tar -C back -xzf self.tgz && diff -r a back/a",
                     v_.mountpoint());
  ASSERT_EQ(r.status, 0) << r.output;
}

TEST_F(Programs, GitInitCommitLog) {
  auto r = v_.sh(
      "git init -q repo && cd repo && git config user.email t@example.org && git config user.name Tester && "
      "for i in 1 2 3; do echo change $i >> file.txt; mkdir -p dir$i; echo $i > dir$i/f; git add -A; "
      "git commit -q -m \"commit $i\"; done && git gc -q && git log --oneline | wc -l && git fsck --strict 2>&1 && "
      "git status --porcelain | wc -l");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "3\n0\n");
  v_.remount();
  r = v_.sh("cd repo && git log --format=%s | head -1 && git fsck --strict 2>&1 && cat file.txt | wc -l");
  EXPECT_EQ(r.output, "commit 3\n3\n") << r.output;
}

TEST_F(Programs, Sqlite) {
  GCFS_REQUIRE_PROGRAM("sqlite3");
  auto r = v_.sh(
      "sqlite3 db.sqlite 'PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);' >/dev/null && "
      "for i in $(seq 1 20); do echo \"INSERT INTO t(v) VALUES (hex(randomblob(3000)));\"; done | sqlite3 db.sqlite && "
      "sqlite3 db.sqlite 'UPDATE t SET v = upper(v) WHERE k % 3 = 0; DELETE FROM t WHERE k % 5 = 0; VACUUM;' && "
      "sqlite3 db.sqlite 'PRAGMA integrity_check; SELECT count(*) FROM t;'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "ok\n16\n");
  v_.remount();
  r = v_.sh("sqlite3 db.sqlite 'PRAGMA integrity_check; SELECT count(*), sum(length(v)) FROM t;'");
  EXPECT_EQ(r.output, "ok\n16|96000\n");
}

TEST_F(Programs, RsyncBothWays) {
  GCFS_REQUIRE_PROGRAM("rsync");
  make_tree(plain_.path());
  auto r = run_shell("rsync -aHX " + shell_quote(plain_.path() + "/") + " " + shell_quote(v_.path("r/")) +
                     " && echo more >> " + shell_quote(plain_.path() + "/a/b/c/deep.txt") + " && rsync -aHX --delete " +
                     shell_quote(plain_.path() + "/") + " " + shell_quote(v_.path("r/")) + " && diff -r " +
                     shell_quote(plain_.path()) + " " + shell_quote(v_.path("r")) + " && rsync -a --checksum " +
                     shell_quote(v_.path("r/")) + " " + shell_quote(plain_.path() + "/back/") + " && diff -r " +
                     shell_quote(v_.path("r/a")) + " " + shell_quote(plain_.path() + "/back/a"));
  ASSERT_EQ(r.status, 0) << r.output;
}

TEST_F(Programs, SedInPlace) {
  auto r = v_.sh("seq 1 20000 > numbers && sed -i 's/^1/one-/' numbers && grep -c '^one-' numbers && tail -1 numbers");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "11111\n20000\n");
}

TEST_F(Programs, CompileAndRunWithGxx) {
  write_file(v_.path("hello.cc"),
             "#include <cstdio>\n#include <fstream>\nint main(){std::ofstream(\"out.txt\")<<\"built here\";"
             "std::puts(\"ran\");}\n");
  auto r = v_.sh("g++ -O0 -o hello hello.cc && ./hello && cat out.txt");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "ran\nbuilt here");
}

TEST_F(Programs, MmapReadAndWrite) {
  const std::string p = v_.path("mapped");
  const std::size_t size = 3 * 65536 + 1234;  // crosses chunk boundaries, ends in a partial chunk
  std::string data(size, '\0');
  for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<char>('a' + i % 26);
  write_file(p, data);
  int fd = ::open(p.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* bytes = static_cast<char*>(m);
  EXPECT_EQ(std::string(bytes, size), data);
  for (std::size_t off : {std::size_t{0}, std::size_t{65535}, std::size_t{65536}, size - 1}) {
    bytes[off] = '#';
    data[off] = '#';
  }
  ASSERT_EQ(::msync(m, size, MS_SYNC), 0);
  ::munmap(m, size);
  ::close(fd);
  v_.remount();
  EXPECT_EQ(read_file(p), data);
}

}  // namespace
}  // namespace gcfs::test
