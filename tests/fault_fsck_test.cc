// Damage done to a vault's ciphertext on purpose, one kind per test: reads fail with EIO for
// exactly the damaged part, the rest stays readable, the log names the file, and fsck
// (fs/fsck/vault_check) finds each one with the right ciphertext and plaintext paths. Without FUSE:
// files are read through ContentFile as the daemon reads them.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include <openssl/evp.h>

#include "crypto/base64url.h"

#include "fs/log.h"
#include "fs/fsck/vault_check.h"
#include "tests/fault_support.h"

namespace gcfs {
namespace {

using testing::TempDir;
using testing::TestVault;

constexpr std::uint64_t C = TestVault::kChunk;

class FaultFsck : public ::testing::Test {
 protected:
  FaultFsck() : v(tmp / "cipher") {
    log::to_file(tmp / "log");
  }
  ~FaultFsck() override { log::to_stderr(); }

  FsckReport fsck(bool repair = false) {
    FsckOptions o;
    o.repair = repair;
    return check_vault(v.vault(), v.engine(), o);
  }
  std::string log_text() {
    auto b = testing::read_all(tmp / "log");
    return std::string(b.begin(), b.end());
  }
  // The one problem fsck reports for cipher_rel; fails the test unless there is exactly one.
  static const FsckProblem& only_problem(const FsckReport& r, const std::string& cipher_rel) {
    const FsckProblem* found = nullptr;
    for (const auto& p : r.problems) {
      if (p.cipher_path != cipher_rel) continue;
      EXPECT_EQ(found, nullptr) << "two problems for " << cipher_rel;
      found = &p;
    }
    if (!found) {
      ADD_FAILURE() << "no problem reported for " << cipher_rel;
      static FsckProblem none;
      return none;
    }
    return *found;
  }
  // Plaintext of chunk k of the file written with pattern_bytes(n, seed).
  static std::vector<std::uint8_t> chunk_of(const std::vector<std::uint8_t>& data, std::uint64_t k) {
    const std::uint64_t end = std::min<std::uint64_t>(data.size(), (k + 1) * C);
    return {data.begin() + static_cast<std::ptrdiff_t>(k * C), data.begin() + static_cast<std::ptrdiff_t>(end)};
  }
  // Checks every chunk of plain: those in bad give EIO, the others read back exactly.
  void expect_chunks(const std::string& plain, const std::vector<std::uint8_t>& data, std::vector<std::uint64_t> bad) {
    const std::uint64_t n = (data.size() + C - 1) / C;
    for (std::uint64_t k = 0; k < n; ++k) {
      std::vector<std::uint8_t> got;
      const auto want = chunk_of(data, k);
      const ssize_t r = v.read(plain, k * C, want.size(), &got);
      if (std::find(bad.begin(), bad.end(), k) != bad.end()) {
        EXPECT_EQ(r, -EIO) << plain << " chunk " << k << " should fail";
      } else {
        ASSERT_EQ(r, static_cast<ssize_t>(want.size())) << plain << " chunk " << k;
        EXPECT_EQ(got, want) << plain << " chunk " << k;
      }
    }
  }

  TempDir tmp;
  TestVault v;
};

TEST_F(FaultFsck, CleanVaultIsCleanAndUntouched) {
  v.mkdir("/docs");
  v.mkdir("/docs/deep");
  v.write_file("/docs/a.txt", testing::pattern_bytes(3 * C + 100, 1));
  v.write_file("/docs/deep/" + std::string(200, 'L'), testing::pattern_bytes(10, 2));  // a long name
  v.write_file("/empty", {});
  v.write_file("/sparse", testing::pattern_bytes(100, 3), 5 * C);  // chunks 0..4 are holes
  v.symlink("/link", "docs/a.txt");
  const bool xattrs = v.set_xattr("/docs/a.txt", "user.colour", "blue");
  const auto before = testing::snapshot(v.dir());

  const FsckReport r = fsck();
  for (const auto& p : r.problems) ADD_FAILURE() << p.cipher_path << ": " << p.what;
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(r.directories, 3u);
  EXPECT_EQ(r.files, 4u);
  EXPECT_EQ(r.symlinks, 1u);
  EXPECT_EQ(r.chunks, 4u + 1u + 6u);
  EXPECT_EQ(r.holes, 5u);
  if (xattrs) {
    EXPECT_EQ(r.xattrs, 1u);
  }
  EXPECT_EQ(testing::snapshot(v.dir()), before) << "fsck without --repair changed the vault";
  EXPECT_FALSE(std::filesystem::exists(v.dir() + "/" + kLostFoundDirName));
}

TEST_F(FaultFsck, FlippedBitInAChunk) {
  v.mkdir("/d");
  const auto data = testing::pattern_bytes(5 * C, 7);
  v.write_file("/d/file", data);
  testing::flip_bit(v.cipher_path("/d/file"), v.data_offset(2, data.size()) + 100, 3);

  expect_chunks("/d/file", data, {2});
  EXPECT_NE(log_text().find(v.cipher_path("/d/file")), std::string::npos) << "the log does not name the file";
  EXPECT_NE(log_text().find("chunk 2 "), std::string::npos) << log_text();

  const FsckReport r = fsck();
  ASSERT_EQ(r.problems.size(), 1u);
  const auto& p = only_problem(r, v.cipher_rel("/d/file"));
  EXPECT_EQ(p.plain_path, "/d/file");
  EXPECT_NE(p.what.find("chunk 2 of 5"), std::string::npos) << p.what;
  EXPECT_FALSE(p.unreadable);
}

TEST_F(FaultFsck, FlippedBitInTheHeaderMagic) {
  const auto data = testing::pattern_bytes(2 * C, 8);
  v.write_file("/f", data);
  v.write_file("/g", data);
  testing::flip_bit(v.cipher_path("/f"), 1);
  expect_chunks("/f", data, {0, 1});
  expect_chunks("/g", data, {});
  EXPECT_NE(log_text().find(v.cipher_path("/f")), std::string::npos);
  const FsckReport r = fsck();
  ASSERT_EQ(r.problems.size(), 1u);
  const auto& p = only_problem(r, v.cipher_rel("/f"));
  EXPECT_EQ(p.plain_path, "/f");
  EXPECT_NE(p.what.find("header"), std::string::npos) << p.what;
  EXPECT_TRUE(p.unreadable);
}

TEST_F(FaultFsck, FlippedBitInTheFileId) {
  const auto data = testing::pattern_bytes(3 * C, 9);
  v.write_file("/f", data);
  testing::flip_bit(v.cipher_path("/f"), 8 + 5);  // the file ID selects the key: every chunk fails
  expect_chunks("/f", data, {0, 1, 2});
  const FsckReport r = fsck();
  const auto& p = only_problem(r, v.cipher_rel("/f"));
  EXPECT_NE(p.what.find("every chunk fails"), std::string::npos) << p.what;
  EXPECT_TRUE(p.unreadable);
}

TEST_F(FaultFsck, FlippedBitInAName) {
  v.mkdir("/d");
  v.write_file("/d/file", testing::pattern_bytes(100, 10));
  v.write_file("/d/other", testing::pattern_bytes(100, 11));
  const std::string good = v.cipher_path("/d/file");
  std::string bad = good;
  char& c = bad[bad.size() - 5];
  c = c == 'A' ? 'B' : 'A';
  std::filesystem::rename(good, bad);

  const std::string dir_rel = v.cipher_rel("/d");
  int dirfd = ::open((v.dir() + "/" + dir_rel).c_str(), O_RDONLY | O_DIRECTORY);
  DirIv iv{};
  ASSERT_EQ(read_dir_iv(dirfd, &iv, dir_rel), 0);
  EXPECT_FALSE(v.vault().names().to_plain(dirfd, bad.substr(bad.rfind('/') + 1), iv)) << "a damaged name decrypted";
  ::close(dirfd);
  std::vector<std::uint8_t> out;
  EXPECT_EQ(v.read("/d/other", 0, 100, &out), 100);

  const FsckReport r = fsck();
  ASSERT_EQ(r.problems.size(), 1u);
  const auto& p = r.problems[0];
  EXPECT_EQ(p.cipher_path, bad.substr(v.dir().size() + 1));
  EXPECT_EQ(p.plain_path, "");
  EXPECT_NE(p.what.find("does not decrypt"), std::string::npos) << p.what;
  EXPECT_NE(p.what.find("in plaintext directory /d"), std::string::npos) << p.what;
  EXPECT_TRUE(p.unreadable);
}

TEST_F(FaultFsck, NameMovedToAnotherDirectory) {
  v.mkdir("/a");
  v.mkdir("/b");
  v.write_file("/a/file", testing::pattern_bytes(100, 12));
  const std::string from = v.cipher_path("/a/file");
  const std::string to = v.dir() + "/" + v.cipher_rel("/b") + "/" + from.substr(from.rfind('/') + 1);
  std::filesystem::rename(from, to);
  const FsckReport r = fsck();
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].what.find("in plaintext directory /b"), std::string::npos) << r.problems[0].what;
}

TEST_F(FaultFsck, EditedLongNameFile) {
  const std::string long1 = "/" + std::string(220, 'x'), long2 = "/" + std::string(221, 'y');
  v.write_file(long1, testing::pattern_bytes(10, 13));
  v.write_file(long2, testing::pattern_bytes(10, 14));
  const std::string e1 = v.cipher_path(long1), e2 = v.cipher_path(long2);
  ASSERT_NE(e1.find("gcfs.longname."), std::string::npos);
  // Swap the two .name files: each still decrypts, but no longer matches its entry's hash.
  std::filesystem::rename(e1 + ".name", v.dir() + "/tmp");
  std::filesystem::rename(e2 + ".name", e1 + ".name");
  std::filesystem::rename(v.dir() + "/tmp", e2 + ".name");
  FsckReport r = fsck();
  ASSERT_EQ(r.problems.size(), 2u);
  for (const auto& p : r.problems) EXPECT_NE(p.what.find("does not match its hash"), std::string::npos) << p.what;

  std::filesystem::remove(e2 + ".name");
  r = fsck();
  const auto& p = only_problem(r, e2.substr(v.dir().size() + 1));
  EXPECT_NE(p.what.find("missing"), std::string::npos) << p.what;
}

TEST_F(FaultFsck, ShortNamePlantedInLongForm) {
  // A second spelling of an existing name: the short encoding stored as a long name. It must not
  // decrypt (the directory would list one name twice) and fsck must report it.
  v.write_file("/hello", testing::pattern_bytes(10, 28));
  const std::string entry = v.cipher_rel("/hello");
  DiskName planted;
  planted.encoded = entry;
  planted.is_long = true;
  {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(entry.data(), entry.size(), md, &len, EVP_sha256(), nullptr);
    planted.entry = std::string(kLongNamePrefix) + base64url_encode({md, len});
  }
  int dirfd = ::open(v.dir().c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_EQ(NameMapping::write_name_file(dirfd, planted), 0);
  std::filesystem::copy_file(v.cipher_path("/hello"), v.dir() + "/" + planted.entry);
  DirIv iv{};
  ASSERT_EQ(read_dir_iv(dirfd, &iv, v.dir()), 0);
  EXPECT_FALSE(v.vault().names().to_plain(dirfd, planted.entry, iv)) << "a short name was accepted in long form";
  ::close(dirfd);
  const FsckReport r = fsck();
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(only_problem(r, planted.entry).what.find("second spelling"), std::string::npos);
}

TEST_F(FaultFsck, OrphanLongNameFileAndForeignFile) {
  v.write_file("/" + std::string(230, 'z'), testing::pattern_bytes(10, 15));
  const std::string e = v.cipher_path("/" + std::string(230, 'z'));
  std::filesystem::rename(e, v.dir() + "/elsewhere");  // now "elsewhere" is a name that does not decrypt
  testing::write_all(v.dir() + "/notes.txt", {'h', 'i'});
  const FsckReport r = fsck();
  ASSERT_EQ(r.problems.size(), 3u);
  EXPECT_NE(only_problem(r, e.substr(v.dir().size() + 1) + ".name").what.find("without its entry"), std::string::npos);
  EXPECT_NE(only_problem(r, "notes.txt").what.find("not a file gpucryptfs writes"), std::string::npos);
  EXPECT_NE(only_problem(r, "elsewhere").what.find("does not decrypt"), std::string::npos);
}

TEST_F(FaultFsck, TruncatedInsideTheLastChunk) {
  const auto data = testing::pattern_bytes(3 * C + 500, 16);
  v.write_file("/f", data);
  const std::string p = v.cipher_path("/f");
  std::filesystem::resize_file(p, std::filesystem::file_size(p) - 100);  // 400 plaintext bytes remain in chunk 3
  // The size now says 3*C + 400 bytes: chunk 3 fails, the rest reads.
  std::vector<std::uint8_t> shorter(data.begin(), data.end() - 100);
  auto chunk3 = shorter;
  expect_chunks("/f", std::vector<std::uint8_t>(data.begin(), data.begin() + 3 * C), {});
  std::vector<std::uint8_t> out;
  EXPECT_EQ(v.read("/f", 3 * C, 400, &out), -EIO);
  const FsckReport r = fsck();
  EXPECT_NE(only_problem(r, v.cipher_rel("/f")).what.find("chunk 3 of 4"), std::string::npos);
}

// A file that ends in an incomplete chunk (an append cut short between pages leaves one): the
// mount reads its whole chunks; fsck reports the fragment, without calling the file unreadable.
TEST_F(FaultFsck, TruncatedIntoTheLastChunksNonceAndTag) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1's incomplete chunk; format 2: TruncatedIntoAMetadataBlock";
  const auto data = testing::pattern_bytes(2 * C + 500, 17);
  v.write_file("/f", data);
  const std::string p = v.cipher_path("/f");
  std::filesystem::resize_file(p, std::filesystem::file_size(p) - 500 - 10);  // 18 bytes of chunk 2 left
  std::vector<std::uint8_t> out;
  ASSERT_EQ(v.read("/f", 0, 2 * C + 500, &out), static_cast<ssize_t>(2 * C));  // FORMAT.md "Sizes"
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 2 * C, data.begin()));
  EXPECT_NE(log_text().find("incomplete chunk"), std::string::npos) << log_text();
  const FsckReport r = fsck();
  const auto& pr = only_problem(r, v.cipher_rel("/f"));
  EXPECT_NE(pr.what.find("incomplete chunk of 18 bytes"), std::string::npos) << pr.what;
  EXPECT_EQ(pr.what.find("fail authentication"), std::string::npos) << "chunks 0 and 1 are intact: " << pr.what;
  EXPECT_FALSE(pr.unreadable);
}

TEST_F(FaultFsck, ChunksSwappedWithinAFile) {
  const auto data = testing::pattern_bytes(5 * C, 18);
  v.write_file("/f", data);
  const std::string p = v.cipher_path("/f");
  auto bytes = testing::read_all(p);
  const auto r1 = v.chunk_ranges(1, data.size()), r3 = v.chunk_ranges(3, data.size());
  for (std::size_t i = 0; i < r1.size(); ++i)
    std::swap_ranges(bytes.begin() + static_cast<std::ptrdiff_t>(r1[i].first),
                     bytes.begin() + static_cast<std::ptrdiff_t>(r1[i].first + r1[i].second),
                     bytes.begin() + static_cast<std::ptrdiff_t>(r3[i].first));
  testing::write_all(p, bytes);
  expect_chunks("/f", data, {1, 3});
  const FsckReport r = fsck();
  EXPECT_NE(only_problem(r, v.cipher_rel("/f")).what.find("chunks 1, 3 of 5"), std::string::npos);
}

TEST_F(FaultFsck, ChunkCopiedFromAnotherFile) {
  const auto a = testing::pattern_bytes(3 * C, 19), b = testing::pattern_bytes(3 * C, 20);
  v.write_file("/a", a);
  v.write_file("/b", b);
  auto ba = testing::read_all(v.cipher_path("/a")), bb = testing::read_all(v.cipher_path("/b"));
  for (auto [off, len] : v.chunk_ranges(1, a.size()))
    std::copy_n(bb.begin() + static_cast<std::ptrdiff_t>(off), len, ba.begin() + static_cast<std::ptrdiff_t>(off));
  testing::write_all(v.cipher_path("/a"), ba);
  expect_chunks("/a", a, {1});
  expect_chunks("/b", b, {});
  const FsckReport r = fsck();
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(only_problem(r, v.cipher_rel("/a")).what.find("chunk 1 of 3"), std::string::npos);
}

TEST_F(FaultFsck, FileFromAnotherVault) {
  TestVault other(tmp / "other");
  const auto data = testing::pattern_bytes(2 * C, 21);
  other.write_file("/f", data);
  v.write_file("/f", testing::pattern_bytes(2 * C, 22));
  // Its content under our name: the header parses, but no chunk authenticates under our keys.
  testing::write_all(v.cipher_path("/f"), testing::read_all(other.cipher_path("/f")));
  // And the whole entry copied in: its name does not decrypt here.
  std::filesystem::copy_file(other.cipher_path("/f"), v.dir() + "/" + other.cipher_rel("/f"));
  expect_chunks("/f", data, {0, 1});
  const FsckReport r = fsck();
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_NE(only_problem(r, v.cipher_rel("/f")).what.find("every chunk fails"), std::string::npos);
  EXPECT_NE(only_problem(r, other.cipher_rel("/f")).what.find("does not decrypt"), std::string::npos);
}

TEST_F(FaultFsck, DamagedDirIvSymlinkAndXattr) {
  v.mkdir("/d");
  v.write_file("/d/f", testing::pattern_bytes(10, 23));
  v.symlink("/link", "somewhere/else");
  v.write_file("/x", testing::pattern_bytes(10, 24));
  const bool xattrs = v.set_xattr("/x", "user.tag", "value");
  const std::string d = v.cipher_path("/d"), link = v.cipher_path("/link");
  std::filesystem::resize_file(d + "/" + kDirIvFileName, 15);
  std::filesystem::remove(link);
  std::filesystem::create_symlink("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", link);
  if (xattrs) {
    const std::string x = v.cipher_path("/x");
    char names[1024];
    ssize_t n = ::llistxattr(x.c_str(), names, sizeof names);
    ASSERT_GT(n, 0);
    std::vector<std::uint8_t> val(256);
    ssize_t vl = ::lgetxattr(x.c_str(), names, val.data(), val.size());
    ASSERT_GT(vl, 0);
    val[static_cast<std::size_t>(vl) - 1] ^= 1;
    ASSERT_EQ(::lsetxattr(x.c_str(), names, val.data(), static_cast<std::size_t>(vl), 0), 0);
  }
  const FsckReport r = fsck();
  EXPECT_EQ(r.problems.size(), xattrs ? 3u : 2u);
  // The directory's names no longer decrypt; the problem names the IV, with its plaintext path.
  const auto& iv = only_problem(r, v.cipher_rel("/d") + "/" + kDirIvFileName);
  EXPECT_EQ(iv.plain_path, "/d");
  EXPECT_NE(only_problem(r, v.cipher_rel("/link")).what.find("symlink"), std::string::npos);
  if (xattrs) {
    EXPECT_NE(only_problem(r, v.cipher_rel("/x")).what.find("user.tag"), std::string::npos);
  }
}

// Long symlink targets: a clean one counts as a symlink; an edited file, a missing one and a file
// no link holds are each reported, and --repair moves the link and the stray file aside.
TEST_F(FaultFsck, LongSymlinkTargets) {
  v.mkdir("/d");
  const std::string target(4095, 't');
  const std::string good = v.long_symlink("/d/good", target);
  const std::string edited = v.long_symlink("/d/edited", target);
  const std::string lost = v.long_symlink("/d/lost", target);
  FsckReport r = fsck();
  for (const auto& p : r.problems) ADD_FAILURE() << p.cipher_path << ": " << p.what;
  EXPECT_EQ(r.symlinks, 3u);

  const std::string d = v.cipher_path("/d");
  std::filesystem::permissions(d + "/" + edited, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  {
    std::fstream f(d + "/" + edited, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    const char was = static_cast<char>(f.get());
    // Base64url text, as valid as before, but not what the link's hash names: another letter
    // than the one there (a fixed 'A' left one file in 64 unchanged, and the test failing).
    f.seekp(100);
    f.put(was == 'A' ? 'B' : 'A');
  }
  std::filesystem::remove(d + "/" + lost);
  { std::ofstream(d + "/gcfs.longtarget.stray") << "x"; }
  r = fsck();
  EXPECT_EQ(r.problems.size(), 4u);
  EXPECT_NE(only_problem(r, v.cipher_rel("/d/edited")).what.find("does not match its hash"), std::string::npos);
  EXPECT_NE(only_problem(r, v.cipher_rel("/d/lost")).what.find("is missing"), std::string::npos);
  // The edited file no longer serves its link, so --repair takes it aside with the link.
  EXPECT_NE(only_problem(r, v.cipher_rel("/d") + "/" + edited).what.find("without a readable symlink"),
            std::string::npos);
  EXPECT_NE(only_problem(r, v.cipher_rel("/d") + "/gcfs.longtarget.stray").what.find("without a readable symlink"),
            std::string::npos);

  r = fsck(true);
  EXPECT_TRUE(std::filesystem::is_symlink(v.cipher_path("/d/good")));
  EXPECT_TRUE(std::filesystem::exists(d + "/" + good));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(v.cipher_path("/d/edited"))));
  EXPECT_FALSE(std::filesystem::exists(d + "/gcfs.longtarget.stray"));
  EXPECT_FALSE(std::filesystem::exists(d + "/" + edited));
  EXPECT_TRUE(fsck().clean()) << "--repair left a problem behind";
}

TEST_F(FaultFsck, PlantedHeaderIsNotReused) {
  // File ID poisoning (gocryptfs audit 2.2): someone with write access puts another file's header
  // into an empty file. The next write must not adopt that file ID, or chunks could be moved
  // between the two files undetected.
  v.write_file("/victim", testing::pattern_bytes(2 * C, 30));
  v.write_file("/empty", {});
  const auto victim = testing::read_all(v.cipher_path("/victim"));
  testing::write_all(v.cipher_path("/empty"), std::vector<std::uint8_t>(victim.begin(), victim.begin() + 24));
  const auto data = testing::pattern_bytes(C + 10, 31);
  v.write_file("/empty", data);
  const auto after = testing::read_all(v.cipher_path("/empty"));
  ASSERT_GE(after.size(), 24u);
  EXPECT_FALSE(std::equal(after.begin() + 8, after.begin() + 24, victim.begin() + 8)) << "the planted file ID was reused";
  expect_chunks("/empty", data, {});
  EXPECT_TRUE(fsck().clean());
}

TEST_F(FaultFsck, FlippedBitInADirIv) {
  v.mkdir("/d");
  v.write_file("/d/f", testing::pattern_bytes(10, 26));
  v.write_file("/d/g", testing::pattern_bytes(10, 27));
  testing::flip_bit(v.cipher_path("/d") + "/" + kDirIvFileName, 3);
  const FsckReport r = fsck();
  ASSERT_EQ(r.problems.size(), 2u);
  for (const auto& p : r.problems) EXPECT_NE(p.what.find("diriv is probably damaged"), std::string::npos) << p.what;
}

TEST_F(FaultFsck, RepairMovesOnlyUnreadableItemsAndDeletesNothing) {
  v.mkdir("/d");
  const auto data = testing::pattern_bytes(3 * C, 25);
  v.write_file("/d/chunk-damaged", data);
  v.write_file("/d/header-damaged", data);
  v.write_file("/d/name-damaged", data);
  v.write_file("/d/" + std::string(240, 'q'), data);  // a long name whose .name file goes missing
  v.write_file("/fine", data);
  testing::flip_bit(v.cipher_path("/d/chunk-damaged"), v.data_offset(1, data.size()) + 28);
  testing::flip_bit(v.cipher_path("/d/header-damaged"), 0);
  const std::string named = v.cipher_path("/d/name-damaged");
  const std::string renamed = named.substr(0, named.size() - 3) + (named.substr(named.size() - 3) == "AAA" ? "BBB" : "AAA");
  std::filesystem::rename(named, renamed);
  const std::string long_entry = v.cipher_path("/d/" + std::string(240, 'q'));
  std::filesystem::rename(long_entry + ".name", v.dir() + "/" + v.cipher_rel("/d") + "/gcfs.longname.unrelated.name");

  auto contents = [&] {
    std::multiset<std::string> all;
    for (auto& [path, what] : testing::snapshot(v.dir()))
      if (what.starts_with("100")) all.insert(what.substr(what.find(' ')));  // regular files: size and bytes
    return all;
  };
  const auto before = contents();
  const FsckReport r = fsck(true);
  std::size_t moved = 0;
  for (const auto& p : r.problems) {
    if (!p.moved_to.empty()) ++moved;
    EXPECT_EQ(p.unreadable, !p.moved_to.empty()) << p.cipher_path << ": " << p.what;
  }
  EXPECT_EQ(moved, 4u);  // header, name, long name without .name, the orphan .name file
  // Nothing was deleted: every regular file's bytes are still somewhere in CIPHERDIR (one new
  // file, the lost+found index, was added).
  auto after = contents();
  for (const auto& c : before) {
    auto it = after.find(c);
    ASSERT_NE(it, after.end()) << "a file's bytes are gone";
    after.erase(it);
  }
  EXPECT_EQ(after.size(), 1u);
  const std::string index = v.dir() + "/" + kLostFoundDirName + "/" + kLostFoundIndexName;
  auto idx = testing::read_all(index);
  EXPECT_NE(std::string(idx.begin(), idx.end()).find("/d/header-damaged"), std::string::npos);

  // What is left: the file with one damaged chunk, still readable apart from that chunk.
  const FsckReport again = fsck();
  ASSERT_EQ(again.problems.size(), 1u);
  EXPECT_EQ(again.problems[0].plain_path, "/d/chunk-damaged");
  expect_chunks("/d/chunk-damaged", data, {1});
  expect_chunks("/fine", data, {});
}


// ---- A hostile CIPHERDIR (issue 18): what fsck and --repair find there is damage to report,
// never a reason to block, to act outside CIPHERDIR, or to crash. Each case keeps a canary folder
// outside CIPHERDIR whose snapshot must not change.

// Runs fsck on another thread and fails (instead of hanging the suite) when it does not finish
// within `limit`; a reader stuck on one of `fifos` is then let go by opening its other end.
FsckReport fsck_with_deadline(TestVault& vault, const FsckOptions& o, std::chrono::seconds limit,
                              const std::vector<std::string>& fifos = {}) {
  std::packaged_task<FsckReport()> task([&] { return check_vault(vault.vault(), vault.engine(), o); });
  auto done = task.get_future();
  std::thread worker(std::move(task));
  if (done.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << "fsck did not finish within " << limit.count() << " s (blocked on something in CIPHERDIR?)";
    while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready)
      for (const auto& f : fifos) {
        int fd = ::open(f.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) ::close(fd);
      }
  }
  worker.join();
  return done.get();
}

FsckOptions repair_options() {
  FsckOptions o;
  o.repair = true;
  return o;
}

const FsckProblem* find_problem(const FsckReport& r, const std::string& cipher_rel) {
  for (const auto& p : r.problems)
    if (p.cipher_path == cipher_rel) return &p;
  return nullptr;
}

class FaultFsckHostile : public FaultFsck {
 protected:
  FaultFsckHostile() {
    std::filesystem::create_directories(outside);
    testing::write_all(outside + "/notes.txt", {'m', 'i', 'n', 'e'});
    testing::write_all(outside + "/.bashrc", {'e', 'c', 'h', 'o', '\n'});
    canary_before = testing::snapshot(outside);
  }
  void expect_canary_untouched() {
    EXPECT_EQ(testing::snapshot(outside), canary_before) << "something outside CIPHERDIR changed";
  }
  std::size_t moved(const FsckReport& r) {
    return static_cast<std::size_t>(
        std::count_if(r.problems.begin(), r.problems.end(), [](const FsckProblem& p) { return !p.moved_to.empty(); }));
  }
  const std::string outside = tmp / "outside";
  std::map<std::string, std::string> canary_before;
};

// The finding as filed: a symlink lost+found plus a foreign file made --repair move the file out
// of the vault. Now the link is reported and the repair moves nothing.
TEST_F(FaultFsckHostile, LostFoundLinkIsReportedAndNeverFollowed) {
  testing::write_all(v.dir() + "/planted", {'x'});  // a name that does not decrypt: unreadable
  std::filesystem::create_directory_symlink(outside, v.dir() + "/" + kLostFoundDirName);
  const auto r = fsck_with_deadline(v, repair_options(), std::chrono::seconds(20));
  expect_canary_untouched();
  EXPECT_TRUE(std::filesystem::exists(v.dir() + "/planted")) << "the foreign file was moved";
  EXPECT_EQ(moved(r), 0u);
  const FsckProblem* lf = find_problem(r, kLostFoundDirName);
  ASSERT_NE(lf, nullptr) << "the planted link is not reported";
  EXPECT_NE(lf->what.find("symbolic link"), std::string::npos) << lf->what;
  EXPECT_NE(lf->what.find("moves nothing"), std::string::npos) << lf->what;
  EXPECT_FALSE(r.repair_refused.empty());
  EXPECT_TRUE(std::filesystem::is_symlink(v.dir() + "/" + kLostFoundDirName));
  // Without --repair the link is reported too.
  EXPECT_NE(find_problem(fsck(), kLostFoundDirName), nullptr);
}

// A dangling link where lost+found belongs: --repair must not create the directory it names.
TEST_F(FaultFsckHostile, DanglingLostFoundLinkCreatesNothing) {
  testing::write_all(v.dir() + "/planted", {'x'});
  std::filesystem::create_directory_symlink(outside + "/made-by-fsck", v.dir() + "/" + kLostFoundDirName);
  const auto r = fsck_with_deadline(v, repair_options(), std::chrono::seconds(20));
  expect_canary_untouched();
  EXPECT_FALSE(r.repair_refused.empty());
  EXPECT_EQ(moved(r), 0u);
}

// index.txt as a link to a file outside (a shell startup file): never appended to.
TEST_F(FaultFsckHostile, IndexLinkIsNotWrittenThrough) {
  const std::string lf = v.dir() + "/" + kLostFoundDirName;
  std::filesystem::create_directory(lf);
  std::filesystem::create_symlink(outside + "/.bashrc", lf + "/" + kLostFoundIndexName);
  testing::write_all(v.dir() + "/planted", {'x'});
  const auto r = fsck_with_deadline(v, repair_options(), std::chrono::seconds(20));
  expect_canary_untouched();
  EXPECT_EQ(moved(r), 0u);
  EXPECT_TRUE(std::filesystem::exists(v.dir() + "/planted"));
  const FsckProblem* idx = find_problem(r, std::string(kLostFoundDirName) + "/" + kLostFoundIndexName);
  ASSERT_NE(idx, nullptr);
  EXPECT_NE(idx->what.find("symbolic link"), std::string::npos) << idx->what;
}

// index.txt as a second hard link of a file outside CIPHERDIR (same filesystem): never appended to.
TEST_F(FaultFsckHostile, IndexHardLinkIsNotWrittenThrough) {
  const std::string lf = v.dir() + "/" + kLostFoundDirName;
  std::filesystem::create_directory(lf);
  std::filesystem::create_hard_link(outside + "/.bashrc", lf + "/" + kLostFoundIndexName);
  canary_before = testing::snapshot(outside);  // the link count is part of what must not change
  testing::write_all(v.dir() + "/planted", {'x'});
  const auto r = fsck_with_deadline(v, repair_options(), std::chrono::seconds(20));
  expect_canary_untouched();
  EXPECT_EQ(moved(r), 0u);
  EXPECT_FALSE(r.repair_refused.empty());
  EXPECT_EQ(testing::read_all(outside + "/.bashrc"), (std::vector<std::uint8_t>{'e', 'c', 'h', 'o', '\n'}));
}

// A directory swapped for a link to an outside folder between the check and the move: the move
// goes through the descriptor the check held, so the file moved is the one the check saw in the
// vault, and the outside file of the same name stays where it is.
TEST_F(FaultFsckHostile, DirectorySwappedForALinkBeforeTheMove) {
  v.mkdir("/d");
  const std::string d = v.cipher_path("/d");
  testing::write_all(d + "/notes.txt", {'i', 'n', 's', 'i', 'd', 'e'});
  FsckOptions o = repair_options();
  int swaps = 0;
  o.before_move = [&](const std::string& cipher_path) {
    if (cipher_path != v.cipher_rel("/d") + "/notes.txt") return;
    ++swaps;
    std::filesystem::rename(d, v.dir() + "/swapped");
    std::filesystem::create_directory_symlink(outside, d);
  };
  const auto r = fsck_with_deadline(v, o, std::chrono::seconds(20));
  EXPECT_EQ(swaps, 1);
  expect_canary_untouched();
  const FsckProblem* p = find_problem(r, v.cipher_rel("/d") + "/notes.txt");
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(p->moved_to.empty()) << p->what;
  EXPECT_EQ(testing::read_all(v.dir() + "/" + p->moved_to), (std::vector<std::uint8_t>{'i', 'n', 's', 'i', 'd', 'e'}));
  EXPECT_FALSE(std::filesystem::exists(v.dir() + "/swapped/notes.txt"));
}

// The item itself replaced between the check and the move: not moved (it is not what was checked).
TEST_F(FaultFsckHostile, ItemReplacedBeforeTheMoveStaysPut) {
  testing::write_all(v.dir() + "/planted", {'x'});
  FsckOptions o = repair_options();
  o.before_move = [&](const std::string&) {
    // A new inode (made before the old one goes, so its number cannot be reused) under the name.
    testing::write_all(v.dir() + "/planted.new", {'y'});
    std::filesystem::rename(v.dir() + "/planted.new", v.dir() + "/planted");
  };
  const auto r = fsck_with_deadline(v, o, std::chrono::seconds(20));
  EXPECT_EQ(moved(r), 0u);
  const FsckProblem* p = find_problem(r, "planted");
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->what.find("not moved"), std::string::npos) << p->what;
  EXPECT_TRUE(std::filesystem::exists(v.dir() + "/planted"));
}

// A link in the tree, even one named like a vault directory, is never descended: it is checked as
// a symlink (its target does not decrypt) and --repair moves the link itself, not what it names.
TEST_F(FaultFsckHostile, LinkedDirectoryIsNeverDescended) {
  v.mkdir("/d");
  v.write_file("/d/f", testing::pattern_bytes(100, 40));
  const std::string d = v.cipher_path("/d");
  std::filesystem::rename(d, v.dir() + "/../parked");
  std::filesystem::create_directory_symlink(outside, d);
  std::filesystem::create_directory_symlink(outside, v.dir() + "/elsewhere");  // a name that does not decrypt
  const auto r = fsck_with_deadline(v, repair_options(), std::chrono::seconds(20));
  expect_canary_untouched();
  EXPECT_EQ(r.directories, 1u);  // CIPHERDIR alone
  EXPECT_EQ(r.files, 0u);
  ASSERT_NE(find_problem(r, v.cipher_rel("/d")), nullptr);
  ASSERT_NE(find_problem(r, "elsewhere"), nullptr);
  EXPECT_EQ(moved(r), 2u);
  for (const auto& p : r.problems) {
    if (!p.moved_to.empty()) {
      EXPECT_TRUE(std::filesystem::is_symlink(v.dir() + "/" + p.moved_to)) << p.moved_to;
    }
  }
}

// A planted name with a newline cannot add lines of its own to the index.
TEST_F(FaultFsckHostile, IndexHoldsOneLinePerMove) {
  testing::write_all(v.dir() + "/evil\nfrom etc-passwd\tplaintext home", {'x'});
  const auto r = fsck_with_deadline(v, repair_options(), std::chrono::seconds(20));
  EXPECT_EQ(moved(r), 1u);
  const auto idx = testing::read_all(v.dir() + "/" + kLostFoundDirName + "/" + kLostFoundIndexName);
  EXPECT_EQ(std::count(idx.begin(), idx.end(), '\n'), 1) << std::string(idx.begin(), idx.end());
}

// A FIFO, socket or device node in each place where the vault keeps a file of its own: reported as
// damage within a deadline, never opened.
TEST_F(FaultFsckHostile, SpecialFilesInEveryRoleAreDamageNotAHang) {
  struct Shape {
    const char* name;
    mode_t mode;
  };
  const Shape shapes[] = {{"FIFO", S_IFIFO}, {"socket", S_IFSOCK}, {"character device", S_IFCHR}};
  enum Role { kDirIv, kNameFile, kJournal, kLostFound, kIndex, kForeignEntry, kDirectory };
  const char* role_names[] = {"dir IV", ".name file", "journal", "lost+found", "index", "foreign entry", "directory"};
  int vault_no = 0;
  for (const Shape& shape : shapes) {
    for (int role = kDirIv; role <= kDirectory; ++role) {
      SCOPED_TRACE(std::string(shape.name) + " as " + role_names[role]);
      TestVault w(tmp / ("v" + std::to_string(vault_no++)));
      w.mkdir("/d");
      w.write_file("/d/f", testing::pattern_bytes(50, 41));
      const std::string long_plain = "/d/" + std::string(240, 'n');
      w.write_file(long_plain, testing::pattern_bytes(50, 42));
      std::string path, expect_rel;
      const std::string lf = w.dir() + "/" + kLostFoundDirName;
      switch (role) {
        case kDirIv: path = w.cipher_path("/d") + "/" + kDirIvFileName; expect_rel = w.cipher_rel("/d") + "/" + kDirIvFileName; break;
        case kNameFile: path = w.cipher_path(long_plain) + ".name"; expect_rel = w.cipher_rel(long_plain); break;
        case kJournal: path = w.dir() + "/" + kJournalFileName; expect_rel = kJournalFileName; break;
        case kLostFound: path = lf; expect_rel = kLostFoundDirName; break;
        case kIndex:
          std::filesystem::create_directory(lf);
          path = lf + "/" + kLostFoundIndexName;
          expect_rel = std::string(kLostFoundDirName) + "/" + kLostFoundIndexName;
          break;
        case kForeignEntry: path = w.cipher_path("/d") + "/planted"; expect_rel = w.cipher_rel("/d") + "/planted"; break;
        case kDirectory: path = w.cipher_path("/d"); expect_rel = ""; break;
      }
      if (role == kDirectory) std::filesystem::remove_all(path);
      else std::filesystem::remove(path);
      if (::mknod(path.c_str(), shape.mode | 0600, shape.mode == S_IFCHR ? makedev(1, 3) : 0) != 0) {
        ASSERT_TRUE(shape.mode == S_IFCHR && errno == EPERM) << path << ": " << std::strerror(errno);
        continue;  // device nodes need CAP_MKNOD
      }
      // Something unreadable for --repair to move, so lost+found and its index are used.
      testing::write_all(w.dir() + "/planted", {'x'});
      const auto r = fsck_with_deadline(w, repair_options(), std::chrono::seconds(20), {path});
      EXPECT_FALSE(r.clean());
      if (role == kDirectory) {
        // A special file under a vault directory's name reads like one the user made (mknod through
        // the mount): counted, never opened.
        EXPECT_EQ(r.others, 1u);
        continue;
      }
      const FsckProblem* p = find_problem(r, expect_rel);
      ASSERT_NE(p, nullptr) << "no problem reported for " << expect_rel;
      if (role != kForeignEntry) {
        EXPECT_NE(p->what.find(shape.name), std::string::npos) << p->what;
      }
      if (role == kLostFound || role == kIndex) {
        EXPECT_FALSE(r.repair_refused.empty());
        EXPECT_TRUE(std::filesystem::exists(w.dir() + "/planted")) << "--repair moved something anyway";
      } else {
        EXPECT_FALSE(std::filesystem::exists(w.dir() + "/planted")) << "--repair did not move the foreign file";
      }
    }
  }
  expect_canary_untouched();
}

// The other shapes of issue 18 in the roles where fsck reads a file of the vault's own: a link to
// a file outside, an empty file and a 1 TiB sparse file as dir IV and .name file, a link as the
// journal, and a regular file or a link where lost+found belongs. Each is reported (by what it is) without a big read.
TEST_F(FaultFsckHostile, LinksEmptyAndHugeFilesInTheVaultsOwnRoles) {
  enum Shape { kLinkOut, kEmpty, kHugeSparse };
  enum Role { kDirIv, kNameFile, kJournal, kLostFound };
  struct Case {
    Shape shape;
    Role role;
    const char* expect;  // in the problem's text
  };
  const Case cases[] = {
      {kLinkOut, kDirIv, "symbolic link"},       {kLinkOut, kNameFile, "symbolic link"},
      {kEmpty, kDirIv, "has 0 bytes"},           {kEmpty, kNameFile, "empty"},
      {kHugeSparse, kDirIv, "has 1099511627776 bytes"}, {kHugeSparse, kNameFile, "too big"},
      {kEmpty, kLostFound, "regular file"},      {kLinkOut, kLostFound, "symbolic link"},
      {kLinkOut, kJournal, "symbolic link"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(n));
    TestVault w(tmp / ("w" + std::to_string(n++)));
    w.mkdir("/d");
    const std::string long_plain = "/d/" + std::string(240, 'n');
    w.write_file(long_plain, testing::pattern_bytes(50, 44));
    std::string path, rel;
    switch (c.role) {
      case kDirIv: path = w.cipher_path("/d") + "/" + kDirIvFileName; rel = w.cipher_rel("/d") + "/" + kDirIvFileName; break;
      case kNameFile: path = w.cipher_path(long_plain) + ".name"; rel = w.cipher_rel(long_plain); break;
      case kJournal: path = w.dir() + "/" + kJournalFileName; rel = kJournalFileName; break;
      case kLostFound: path = w.dir() + "/" + kLostFoundDirName; rel = kLostFoundDirName; break;
    }
    std::filesystem::remove(path);
    switch (c.shape) {
      case kLinkOut: std::filesystem::create_symlink(outside + "/notes.txt", path); break;
      case kEmpty: testing::write_all(path, {}); break;
      case kHugeSparse:
        testing::write_all(path, {});
        std::filesystem::resize_file(path, 1ull << 40);
        break;
    }
    testing::write_all(w.dir() + "/planted", {'x'});
    const auto start = std::chrono::steady_clock::now();
    const auto r = fsck_with_deadline(w, repair_options(), std::chrono::seconds(20));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "a big read?";
    const FsckProblem* p = find_problem(r, rel);
    ASSERT_NE(p, nullptr) << "nothing reported for " << rel;
    EXPECT_NE(p->what.find(c.expect), std::string::npos) << p->what;
    EXPECT_EQ(r.repair_refused.empty(), c.role != kLostFound);
  }
  expect_canary_untouched();
}

// A folder for a big tree of directories: on /dev/shm when that tmpfs has room (19,000 mkdirs on a
// busy disk take tens of seconds, on tmpfs a second), else under TMPDIR.
class ScratchDir {
 public:
  ScratchDir() {
    struct statvfs fs {};
    const bool shm = ::statvfs("/dev/shm", &fs) == 0 && ::access("/dev/shm", W_OK) == 0 &&
                     static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize > (512ull << 20);
    const char* tmpdir = std::getenv("TMPDIR");
    std::string tmpl = (shm ? std::string("/dev/shm") : std::string(tmpdir ? tmpdir : "/tmp")) + "/gcfs-deep-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Removes a chain of directories `name` in `name` in ... beneath rootfd, each holding a dir IV,
// without paths (far too long) and without recursion.
void remove_deep_tree(int rootfd, const std::string& name) {
  int fd = ::openat(rootfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  std::size_t depth = 1;
  for (int sub; (sub = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0; ++depth) {
    ::close(fd);
    fd = sub;
  }
  while (depth-- > 0) {
    ::unlinkat(fd, kDirIvFileName, 0);
    int up = ::openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    ::unlinkat(up, name.c_str(), AT_REMOVEDIR);
    if (depth == 0) ::close(up);
    fd = up;
  }
}

// 19,000 nested directories crashed the recursive walk (SIGSEGV). The tree is a valid one (a
// directory "d" in "d" in ...), so the check must also say it is clean; it runs with a low limit
// on open descriptors to show the walk does not keep one per level.
TEST_F(FaultFsckHostile, NineteenThousandNestedDirectories) {
  constexpr int kDepth = 19000;
  ScratchDir scratch;
  TestVault deep(scratch / "cipher");
  int rootfd = ::open(deep.dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(rootfd, 0);
  DirIv iv{};
  ASSERT_EQ(read_dir_iv(rootfd, &iv, deep.dir()), 0);
  const std::string name = deep.vault().names().to_disk("d", iv).entry;  // the same IV at every level
  int fd = ::dup(rootfd);
  for (int i = 0; i < kDepth; ++i) {
    ASSERT_EQ(::mkdirat(fd, name.c_str(), 0700), 0) << "level " << i << ": " << std::strerror(errno);
    int sub = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(sub, 0);
    ::close(fd);
    fd = sub;
    int ivfd = ::openat(fd, kDirIvFileName, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0440);
    ASSERT_EQ(::write(ivfd, iv.data(), iv.size()), static_cast<ssize_t>(iv.size()));
    ::close(ivfd);
  }
  ::close(fd);

  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = std::min<rlim_t>(old.rlim_cur, 256);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  const auto r = fsck_with_deadline(deep, FsckOptions{}, std::chrono::seconds(60));
  ::setrlimit(RLIMIT_NOFILE, &old);
  for (std::size_t i = 0; i < std::min<std::size_t>(r.problems.size(), 3); ++i)
    ADD_FAILURE() << r.problems[i].what.substr(0, 300);
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(r.directories, static_cast<std::uint64_t>(kDepth) + 1);
  remove_deep_tree(rootfd, name);
  ::close(rootfd);
}

// Deeper than the walk keeps descriptors for, a directory high up is moved out from under the
// walk (to CIPHERDIR's top) while it is at the bottom: going back up through "..", the walk must
// notice that the parent is no longer the directory it came down through, report the levels it
// cannot get back to, and read nothing on a way it did not check.
TEST_F(FaultFsckHostile, WalkNoticesATreeMovedUnderIt) {
  constexpr int kDepth = 100, kMovedLevel = 20;
  int rootfd = ::open(v.dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(rootfd, 0);
  DirIv iv{};
  ASSERT_EQ(read_dir_iv(rootfd, &iv, v.dir()), 0);
  const std::string name = v.vault().names().to_disk("d", iv).entry;
  int fd = ::dup(rootfd);
  for (int i = 0; i < kDepth; ++i) {
    ASSERT_EQ(::mkdirat(fd, name.c_str(), 0700), 0);
    int sub = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    fd = sub;
    int ivfd = ::openat(fd, kDirIvFileName, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0440);
    ASSERT_EQ(::write(ivfd, iv.data(), iv.size()), static_cast<ssize_t>(iv.size()));
    ::close(ivfd);
  }
  int planted = ::openat(fd, "planted", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);  // unreadable: moved at the bottom
  ::close(planted);
  ::close(fd);

  FsckOptions o = repair_options();
  o.before_move = [&](const std::string&) {
    int at = ::dup(rootfd);  // level kMovedLevel - 1, reached by descriptors
    for (int i = 1; i < kMovedLevel; ++i) {
      int sub = ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      ::close(at);
      at = sub;
    }
    EXPECT_EQ(::renameat(at, name.c_str(), rootfd, "moved"), 0) << std::strerror(errno);
    ::close(at);
  };
  const auto r = fsck_with_deadline(v, o, std::chrono::seconds(20));
  std::size_t lost = 0;
  for (const auto& p : r.problems)
    if (p.what.find("lost its way back") != std::string::npos) ++lost;
  EXPECT_EQ(lost, static_cast<std::size_t>(kMovedLevel - 1)) << "levels 1.." << kMovedLevel - 1 << " cannot be reached again";
  EXPECT_EQ(moved(r), 1u);
  // The tree is whole again once moved back, and fsck then finds it clean.
  int at = ::dup(rootfd);
  for (int i = 1; i < kMovedLevel; ++i) {
    int sub = ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(at);
    at = sub;
  }
  ASSERT_EQ(::renameat(rootfd, "moved", at, name.c_str()), 0);
  ::close(at);
  ::close(rootfd);
  const auto again = fsck();
  for (const auto& p : again.problems) ADD_FAILURE() << p.cipher_path.substr(0, 80) << ": " << p.what;
  EXPECT_EQ(again.directories, static_cast<std::uint64_t>(kDepth) + 1);
}

// issue 20: a 1 TiB sparse file with a few bytes at its end is checked from its data, not by
// reading a terabyte of holes.
TEST_F(FaultFsckHostile, TerabyteSparseFileIsQuick) {
  constexpr std::uint64_t kTiB = 1ull << 40;
  const auto tail = testing::pattern_bytes(100, 43);
  try {
    v.write_file("/huge", tail, kTiB - tail.size());
  } catch (const std::exception& e) {
    GTEST_SKIP() << "the backing filesystem cannot hold a 1 TiB sparse file: " << e.what();
  }
  const auto start = std::chrono::steady_clock::now();
  // Progress counts the bytes to check, not the terabyte of holes.
  FsckOptions progress;
  FsckProgress last;
  progress.progress = [&](const FsckProgress& p) { last = p; };
  const auto r = fsck_with_deadline(v, progress, std::chrono::seconds(60));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(r.clean());
  EXPECT_LT(last.total_bytes, 1u << 20) << "the progress counted holes";
  EXPECT_EQ(last.done_bytes, last.total_bytes);
  EXPECT_EQ(r.chunks, kTiB / C);
  EXPECT_EQ(r.holes, kTiB / C - 1);
  EXPECT_LT(took, std::chrono::seconds(2)) << "fsck read the holes";
  std::vector<std::uint8_t> got;
  ASSERT_EQ(v.read("/huge", kTiB - tail.size(), tail.size(), &got), static_cast<ssize_t>(tail.size()));
  EXPECT_EQ(got, tail);
}

}  // namespace
}  // namespace gcfs

namespace gcfs {
namespace {

// Format 2's counterpart of an incomplete last chunk: a file that ends inside a metadata block (a
// growing write whose entries landed and whose data did not). The mount reads the whole groups
// before it; fsck reports it without calling the file unreadable. And a size that no write
// leaves (chunk 0 cut short moving out of the header block) is reported as unreadable.
TEST(FaultFsckFormat2, TruncatedIntoAMetadataBlockOrOutOfTheHeaderBlock) {
  testing::TempDir tmp("gcfs-fsck2");
  TestVault v(tmp / "v", 2);
  constexpr std::uint64_t C = TestVault::kChunk;
  const auto data = testing::pattern_bytes(128 * C + 500, 31);
  v.write_file("/f", data);
  const std::string p = v.cipher_path("/f");
  std::filesystem::resize_file(p, v.layout().meta_block_offset(1) + 100);
  std::vector<std::uint8_t> out;
  ASSERT_EQ(v.read("/f", 0, data.size(), &out), static_cast<ssize_t>(128 * C));
  EXPECT_TRUE(std::equal(out.begin(), out.end(), data.begin()));
  ChunkEngine& engine = v.engine();
  FsckReport r = check_vault(v.vault(), engine, {});
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].what.find("ends 100 bytes into a metadata block"), std::string::npos) << r.problems[0].what;
  EXPECT_FALSE(r.problems[0].unreadable);

  v.write_file("/g", testing::pattern_bytes(5000, 32));
  std::filesystem::resize_file(v.cipher_path("/g"), 4096 + 1000);  // chunk 0's data block, cut short
  r = check_vault(v.vault(), engine, {});
  bool found = false;
  for (const auto& pr : r.problems)
    if (pr.cipher_path == v.cipher_rel("/g")) {
      found = true;
      EXPECT_NE(pr.what.find("impossible for format 2"), std::string::npos) << pr.what;
      EXPECT_TRUE(pr.unreadable);
    }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace gcfs
