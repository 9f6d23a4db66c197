// What reaches CIPHERDIR, and what happens when it is changed behind the mount's back: no
// plaintext name, content, symlink target or xattr ever lands there, and one flipped ciphertext
// byte makes just that chunk unreadable (EIO, logged with the file) while the others still read.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

constexpr std::size_t kChunk = 4096;
constexpr std::size_t kHeader = 24, kDiskChunk = kChunk + 28;

VaultOptions small_chunks() {
  VaultOptions o;
  o.chunk_size = kChunk;
  return o;
}

// The ciphertext files in CIPHERDIR's root that are not the vault's own.
std::vector<std::string> user_files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.find('.') == std::string::npos) out.push_back(dir + "/" + n);
  }
  ::closedir(d);
  return out;
}

void flip_byte(const std::string& path, std::size_t off) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(off)), 1);
  b ^= 0x20;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(off)), 1);
  ::close(fd);
}

// Reads [off, off+len) with a fresh descriptor; returns the bytes or sets *err.
std::string read_range(const std::string& path, std::size_t off, std::size_t len, int* err) {
  std::string buf(len, '\0');
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    *err = errno;
    return {};
  }
  ssize_t n = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
  *err = n < 0 ? errno : 0;
  ::close(fd);
  buf.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
  return buf;
}

TEST(Tamper, FlippedByteFailsOnlyItsChunkAndIsLogged) {
  MountedVault v(small_chunks());
  std::string data(5 * kChunk, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / kChunk);
  write_file(v.path("victim"), data);
  v.unmount();
  auto files = user_files(v.cipherdir());
  ASSERT_EQ(files.size(), 1u);
  // Inside chunk 2's ciphertext: format 1 keeps it after its nonce, format 2 in its aligned data
  // block, behind the header block.
  flip_byte(files[0], (test_format() == 2 ? 4096 + 2 * kChunk : kHeader + 2 * kDiskChunk + 12) + 100);
  v.mount();
  int err = 0;
  for (std::size_t k : {0u, 1u, 3u, 4u}) {
    std::string got = read_range(v.path("victim"), k * kChunk, kChunk, &err);
    EXPECT_EQ(err, 0) << "chunk " << k;
    EXPECT_TRUE(got == data.substr(k * kChunk, kChunk)) << "chunk " << k;
  }
  read_range(v.path("victim"), 2 * kChunk + 10, 10, &err);
  EXPECT_EQ(err, EIO);
  // A read spanning the damaged chunk stops before it: short (POSIX lets a read return what it
  // got before an error) or EIO, never bytes from the damaged chunk.
  std::string got = read_range(v.path("victim"), 0, data.size(), &err);
  EXPECT_TRUE(err == EIO || (err == 0 && got.size() <= 2 * kChunk)) << err << " " << got.size();
  EXPECT_TRUE(got == data.substr(0, got.size()));
  const std::string log = v.log();
  EXPECT_NE(log.find(files[0]), std::string::npos) << log;
  EXPECT_NE(log.find("chunk 2"), std::string::npos) << log;
}

// A damaged header makes the whole file EIO; a file cut into its last chunk's nonce and tag (as an
// append cut short between pages leaves it) reads as its whole chunks, and the log says so.
TEST(Tamper, DamagedHeaderGivesEioAndAnIncompleteLastChunkIsLeftOut) {
  if (test_format() == 2) GTEST_SKIP() << "format 1's sizes; format 2's fragment: IncompleteLastChunk in integration_file_size_test";
  MountedVault v(small_chunks());
  write_file(v.path("h"), std::string(3 * kChunk, 'h'));
  write_file(v.path("s"), std::string(5 * kChunk, 's'));
  v.unmount();
  std::string h_cipher, s_cipher;  // told apart by their sizes
  for (const auto& f : user_files(v.cipherdir())) {
    struct stat st {};
    ::stat(f.c_str(), &st);
    (static_cast<std::size_t>(st.st_size) == kHeader + 3 * kDiskChunk ? h_cipher : s_cipher) = f;
  }
  ASSERT_FALSE(h_cipher.empty());
  ASSERT_FALSE(s_cipher.empty());
  flip_byte(h_cipher, 1);                                                // header magic
  ASSERT_EQ(::truncate(s_cipher.c_str(), kHeader + 2 * kDiskChunk + 5), 0);  // 5 bytes: no chunk is that short
  v.mount();
  int err_h = 0, err_s = 0;
  read_range(v.path("h"), 0, 10, &err_h);
  const std::string s_back = read_range(v.path("s"), 0, 5 * kChunk, &err_s);
  EXPECT_EQ(err_h, EIO);
  EXPECT_EQ(err_s, 0);
  EXPECT_EQ(s_back, std::string(2 * kChunk, 's')) << "the two whole chunks, not the fragment";
  EXPECT_NE(v.log().find("incomplete chunk"), std::string::npos) << v.log();
  struct stat st {};
  ASSERT_EQ(::stat(v.path("s").c_str(), &st), 0);
  EXPECT_EQ(static_cast<std::size_t>(st.st_size), 2 * kChunk) << "stat agrees with what reads";
  // A damaged file can still be removed.
  EXPECT_EQ(::unlink(v.path("h").c_str()), 0);
  EXPECT_EQ(::unlink(v.path("s").c_str()), 0);
}

TEST(Tamper, ForeignAndMovedEntriesAreHidden) {
  MountedVault v;
  ASSERT_EQ(::mkdir(v.path("d").c_str(), 0755), 0);
  write_file(v.path("d/inside"), "x");
  write_file(v.path("top"), "y");
  v.unmount();
  // Drop a file that is not ours and move an entry from d into the root (wrong dir IV).
  write_file(v.cipherdir() + "/NotOursAtAll", "z");
  auto r = run_shell("cd " + shell_quote(v.cipherdir()) + " && for d in */; do for f in \"$d\"*; do "
                     "case \"$f\" in *.*) ;; *) mv -- \"$f\" ./movedEntry;; esac; done; done");
  ASSERT_EQ(r.status, 0) << r.output;
  v.mount();
  r = v.sh("ls -A | sort | tr '\\n' ' '; ls -A d | wc -l");
  EXPECT_EQ(r.output, "d top 0\n") << run_shell("find . -ls; cat ../gpucryptfs.log", v.cipherdir()).output;
  EXPECT_NE(v.log().find("do not decrypt"), std::string::npos) << v.log();
}

TEST(Tamper, MissingDirIvAndForgedSymlinkGiveEioAndAreLogged) {
  MountedVault v;
  ASSERT_EQ(::mkdir(v.path("d").c_str(), 0755), 0);
  write_file(v.path("d/f"), "x");
  ASSERT_EQ(::symlink("somewhere", v.path("link").c_str()), 0);
  v.unmount();
  // "--": ciphertext names are base64url and may start with '-'.
  auto r = run_shell("rm -f -- */gpucryptfs.diriv && for l in $(find . -maxdepth 1 -type l); do "
                     "ln -sfn AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA \"$l\"; done",
                     v.cipherdir());
  ASSERT_EQ(r.status, 0) << r.output;
  v.mount();
  DIR* d = ::opendir(v.path("d").c_str());
  errno = 0;
  if (d) {
    EXPECT_EQ(::readdir(d), nullptr);
    ::closedir(d);
  }
  EXPECT_EQ(errno, EIO);
  char buf[64];
  EXPECT_EQ(::readlink(v.path("link").c_str(), buf, sizeof buf), -1);
  EXPECT_EQ(errno, EIO);
  EXPECT_NE(v.log().find("gpucryptfs.diriv: cannot open the directory IV"), std::string::npos) << v.log();
  EXPECT_NE(v.log().find("symlink target does not decrypt"), std::string::npos) << v.log();
}

TEST(Leak, CipherdirNeverHoldsPlaintext) {
  GCFS_REQUIRE_PROGRAM("setfattr");
  MountedVault v;
  const std::string marker = "PlainMarker7d1e";
  const std::string long_name = marker + std::string(220, 'q');
  auto r = v.sh("mkdir " + marker + "Dir && echo " + marker + "Content > " + marker + "Dir/" + marker + "File && "
                "for i in $(seq 1 2000); do echo " + marker + "Line$i; done > " + long_name + " && "
                "ln -s " + marker + "Target " + marker + "Link && mkfifo " + marker + "Fifo && "
                "setfattr -n user." + marker + "Attr -v " + marker + "Value " + long_name + " && "
                "head -c 200000 /dev/zero | tr '\\0' 'A' > zeros && ln " + long_name + " " + marker + "Hardlink");
  ASSERT_EQ(r.status, 0) << r.output;
  auto check = [&](const char* when) {
    auto g = run_shell("grep -r -a -l -e " + marker + " -e AAAAAAAAAAAAAAAA . ; find . -name '*" + marker +
                       "*'; find . -type l -lname '*" + marker + "*'; getfattr -R -d . 2>/dev/null | grep -i " + marker,
                       v.cipherdir());
    EXPECT_EQ(g.output, "") << "plaintext in CIPHERDIR " << when;
  };
  check("while mounted");
  v.unmount();
  check("after unmount");
}

}  // namespace
}  // namespace gcfs::test
