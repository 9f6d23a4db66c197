// Name mapping as docs/FORMAT.md specifies it: SIV names under the directory IV, the long-name
// form from exactly the first plaintext length whose encoding passes 255 bytes, our own dot-names
// hidden, and symlink targets and xattrs sealed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "crypto/random.h"
#include "fs/dir_iv.h"
#include "fs/name_mapping.h"

namespace gcfs {
namespace {

std::vector<std::uint8_t> fixed_master() { return std::vector<std::uint8_t>(32, 0x42); }

class NameMappingTest : public ::testing::Test {
 protected:
  NameMappingTest() : keys_(fixed_master()), names_(keys_) {
    char templ[] = "/tmp/gcfs-names.XXXXXX";
    dir_ = ::mkdtemp(templ);
    dirfd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
    iv_.fill(7);
  }
  ~NameMappingTest() override {
    ::close(dirfd_);
    std::string cmd = "rm -rf '" + dir_ + "'";
    (void)std::system(cmd.c_str());
  }
  KeyRing keys_;
  NameMapping names_;
  std::string dir_;
  int dirfd_ = -1;
  DirIv iv_{};
};

TEST_F(NameMappingTest, ShortNameRoundTripsAndIsDeterministic) {
  DiskName a = names_.to_disk("hello.txt", iv_);
  DiskName b = names_.to_disk("hello.txt", iv_);
  EXPECT_FALSE(a.is_long);
  EXPECT_EQ(a.entry, b.entry);
  EXPECT_EQ(a.entry, a.encoded);
  EXPECT_EQ(a.entry.find('.'), std::string::npos) << "encoded names must never contain a dot";
  EXPECT_EQ(names_.to_plain(dirfd_, a.entry, iv_), "hello.txt");
}

TEST_F(NameMappingTest, OtherDirectoryIvGivesOtherNameAndDoesNotDecrypt) {
  DirIv other = iv_;
  other[0] ^= 1;
  DiskName a = names_.to_disk("report", iv_);
  EXPECT_NE(a.entry, names_.to_disk("report", other).entry);
  EXPECT_EQ(names_.to_plain(dirfd_, a.entry, other), std::nullopt);
}

TEST_F(NameMappingTest, LongNameStartsExactlyWhereTheEncodingPasses255Bytes) {
  // SIV adds 16 bytes; unpadded base64url of 191 bytes is 255 characters, of 192 bytes 256.
  DiskName at = names_.to_disk(std::string(175, 'x'), iv_);
  EXPECT_FALSE(at.is_long);
  EXPECT_EQ(at.entry.size(), 255u);
  DiskName past = names_.to_disk(std::string(176, 'x'), iv_);
  EXPECT_TRUE(past.is_long);
  EXPECT_TRUE(past.entry.starts_with("gcfs.longname."));
  EXPECT_LE(past.entry.size(), 255u);
  EXPECT_LE(past.name_file().size(), 255u);
}

TEST_F(NameMappingTest, LongNameOf255BytesRoundTripsThroughItsNameFile) {
  const std::string plain(255, 'n');
  DiskName d = names_.to_disk(plain, iv_);
  ASSERT_TRUE(d.is_long);
  EXPECT_EQ(names_.to_plain(dirfd_, d.entry, iv_), std::nullopt) << "no .name file yet";
  ASSERT_EQ(NameMapping::write_name_file(dirfd_, d), 0);
  ASSERT_EQ(NameMapping::write_name_file(dirfd_, d), 0) << "writing it again is harmless";
  EXPECT_EQ(names_.to_plain(dirfd_, d.entry, iv_), plain);
  EXPECT_EQ(names_.to_plain(dirfd_, d.name_file(), iv_), std::nullopt) << ".name files are hidden";
  ASSERT_EQ(NameMapping::remove_name_file(dirfd_, d), 0);
  EXPECT_EQ(names_.to_plain(dirfd_, d.entry, iv_), std::nullopt);
}

TEST_F(NameMappingTest, SwappedNameFileIsRefused) {
  DiskName a = names_.to_disk(std::string(200, 'a'), iv_);
  DiskName b = names_.to_disk(std::string(200, 'b'), iv_);
  // a's entry with b's encoded name inside: the hash no longer matches.
  DiskName forged{a.entry, b.encoded, true};
  ASSERT_EQ(NameMapping::write_name_file(dirfd_, forged), 0);
  EXPECT_EQ(names_.to_plain(dirfd_, a.entry, iv_), std::nullopt);
}

TEST_F(NameMappingTest, OwnDotNamesAndForeignNamesAreHidden) {
  for (const char* n : {"gpucryptfs.conf", "gpucryptfs.diriv", "gpucryptfs.journal", "gcfs.longname.abc.name", ".hidden",
                        "a.b"}) {
    EXPECT_TRUE(is_internal_entry(n)) << n;
    EXPECT_EQ(names_.to_plain(dirfd_, n, iv_), std::nullopt) << n;
  }
  EXPECT_EQ(names_.to_plain(dirfd_, "notbase64!", iv_), std::nullopt);
  EXPECT_EQ(names_.to_plain(dirfd_, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", iv_), std::nullopt);
}

TEST_F(NameMappingTest, TamperedNameFailsToDecrypt) {
  DiskName a = names_.to_disk("payroll", iv_);
  std::string t = a.entry;
  t[3] = t[3] == 'A' ? 'B' : 'A';
  EXPECT_EQ(names_.to_plain(dirfd_, t, iv_), std::nullopt);
}

TEST_F(NameMappingTest, SymlinkTargetsAreSealedWithFreshNonces) {
  const std::string target = "../some/where/file.txt";
  std::string s1 = names_.encrypt_symlink(target), s2 = names_.encrypt_symlink(target);
  EXPECT_NE(s1, s2);
  EXPECT_EQ(s1.find("some"), std::string::npos);
  EXPECT_EQ(names_.decrypt_symlink(s1), target);
  s1[5] = s1[5] == 'A' ? 'B' : 'A';
  EXPECT_EQ(names_.decrypt_symlink(s1), std::nullopt);
}

TEST_F(NameMappingTest, XattrNamesAndValues) {
  EXPECT_EQ(names_.encrypt_xattr_name("system.other"), std::nullopt);
  EXPECT_EQ(names_.encrypt_xattr_name("trusted."), std::nullopt);
  EXPECT_EQ(names_.encrypt_xattr_name("os2.x"), std::nullopt);
  for (const char* n : {"security.selinux", "security.capability", "trusted.overlay.opaque", "system.posix_acl_access",
                        "system.posix_acl_default"}) {
    auto s = names_.encrypt_xattr_name(n);
    ASSERT_TRUE(s) << n;
    EXPECT_TRUE(s->starts_with("user.gcfs.")) << "stored in the backing file's user namespace";
    EXPECT_EQ(names_.decrypt_xattr_name(*s), n);
    // A symlink's, FIFO's or device's: the same name under trusted.gcfs. (no user.* there).
    auto special = names_.encrypt_xattr_name(n, true);
    ASSERT_TRUE(special) << n;
    EXPECT_EQ(*special, "trusted.gcfs." + s->substr(std::string("user.gcfs.").size()));
    EXPECT_EQ(names_.decrypt_xattr_name(*special), n);
    EXPECT_TRUE(NameMapping::is_stored_xattr_name(*special));
  }
  EXPECT_FALSE(NameMapping::is_stored_xattr_name("trusted.other"));
  EXPECT_EQ(names_.decrypt_xattr_name("trusted.gcfs.not-base64-siv"), std::nullopt);
  auto stored = names_.encrypt_xattr_name("user.comment");
  ASSERT_TRUE(stored);
  EXPECT_TRUE(stored->starts_with("user.gcfs."));
  EXPECT_EQ(names_.decrypt_xattr_name(*stored), "user.comment");
  EXPECT_EQ(names_.decrypt_xattr_name("user.other"), std::nullopt);
  const std::vector<std::uint8_t> value = {1, 2, 3, 4};
  auto sealed = names_.encrypt_xattr_value(*stored, value);
  EXPECT_EQ(names_.decrypt_xattr_value(*stored, sealed), value);
  auto other = names_.encrypt_xattr_name("user.other");
  EXPECT_EQ(names_.decrypt_xattr_value(*other, sealed), std::nullopt) << "a value moved to another name fails";
}

TEST_F(NameMappingTest, DirIvCreateReadAndDamage) {
  DirIv made{}, read{};
  ASSERT_EQ(create_dir_iv(dirfd_, &made), 0);
  ASSERT_EQ(read_dir_iv(dirfd_, &read, dir_), 0);
  EXPECT_EQ(made, read);
  EXPECT_EQ(create_dir_iv(dirfd_, nullptr, &made), 0) << "putting the same IV back";
  int fd = ::openat(dirfd_, kDirIvFileName, O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "short", 5), 5);
  ::close(fd);
  EXPECT_EQ(read_dir_iv(dirfd_, &read, dir_), -EIO);
  ::unlinkat(dirfd_, kDirIvFileName, 0);
  EXPECT_EQ(read_dir_iv(dirfd_, &read, dir_), -EIO);
}

// The cap on a .name file's size is exactly the longest encoded name: a 255-byte name's.
TEST_F(NameMappingTest, NameFileCapIsTheLongestEncoding) {
  EXPECT_EQ(names_.to_disk(std::string(255, 'x'), iv_).encoded.size(), kMaxNameFileBytes);
  EXPECT_EQ(kMaxNameFileBytes, 362u);
}

// Shapes where a .name file or the IV belongs: answered at once, never followed, never read whole.
// FIFOs, sockets and devices (which could hang a regression) are planted in a mounted vault,
// every operation under a deadline, by tests/fault_backing_shapes_test.cc.
TEST_F(NameMappingTest, NameFileAndDirIvOfAnotherShapeAreDamage) {
  const std::string plain(200, 'q');
  DiskName d = names_.to_disk(plain, iv_);
  ASSERT_TRUE(d.is_long);
  const std::string name_file = dir_ + "/" + d.name_file();
  const std::string iv_file = dir_ + "/" + kDirIvFileName;
  auto reset = [&] {
    ::unlinkat(dirfd_, d.name_file().c_str(), 0);
    ::unlinkat(dirfd_, d.name_file().c_str(), AT_REMOVEDIR);
    ::unlinkat(dirfd_, kDirIvFileName, 0);
    ::unlinkat(dirfd_, kDirIvFileName, AT_REMOVEDIR);
  };
  // A copy with the right content outside the directory: following a link to it would "work".
  const std::string outside = dir_ + ".outside";
  {
    ASSERT_EQ(NameMapping::write_name_file(dirfd_, d), 0);
    std::string cmd = "cp '" + name_file + "' '" + outside + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    reset();
  }
  struct Case {
    const char* what;
    std::function<int(const std::string&)> make;
  };
  const std::vector<Case> cases = {
      {"directory", [](const std::string& p) { return ::mkdir(p.c_str(), 0755); }},
      {"symbolic link", [&](const std::string& p) { return ::symlink(outside.c_str(), p.c_str()); }},
      {"huge", [](const std::string& p) {
         int fd = ::open(p.c_str(), O_WRONLY | O_CREAT, 0644);
         int rc = fd < 0 ? -1 : ::ftruncate(fd, off_t{1} << 40);
         if (fd >= 0) ::close(fd);
         return rc;
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    reset();
    ASSERT_EQ(c.make(name_file), 0);
    std::string damage;
    EXPECT_EQ(names_.to_plain(dirfd_, d.entry, iv_, &damage), std::nullopt);
    EXPECT_FALSE(damage.empty());
    ASSERT_EQ(c.make(iv_file), 0);
    DirIv got{};
    EXPECT_EQ(read_dir_iv(dirfd_, &got, dir_), -EIO);
    // Storing the name again replaces a damaged .name file, except a directory (left for the user).
    const int rc = NameMapping::write_name_file(dirfd_, d);
    if (std::string(c.what) == "directory") {
      EXPECT_EQ(rc, -EIO);
    } else {
      EXPECT_EQ(rc, 0);
      EXPECT_EQ(names_.to_plain(dirfd_, d.entry, iv_), plain);
    }
  }
  reset();
  ::unlink(outside.c_str());
}

// Names are remembered once encrypted or listed (fs/name_cache.h), keyed by the directory IV: a
// name listed in one directory is never taken for the same entry in another, a tampered entry
// still fails, and a long name still needs its .name file every time it is listed.
TEST_F(NameMappingTest, RememberedNamesStayPerIvAndLongNamesStillNeedTheirFile) {
  DirIv other = iv_;
  other[15] ^= 0x80;
  const DiskName a = names_.to_disk("listed-once", iv_);
  EXPECT_EQ(names_.to_plain(dirfd_, a.entry, iv_), "listed-once");
  EXPECT_EQ(names_.to_plain(dirfd_, a.entry, iv_), "listed-once") << "remembered";
  EXPECT_EQ(names_.to_plain(dirfd_, a.entry, other), std::nullopt) << "another directory's IV";
  EXPECT_NE(names_.to_disk("listed-once", other).entry, a.entry);
  std::string tampered = a.entry;
  tampered[3] = tampered[3] == 'A' ? 'B' : 'A';
  EXPECT_EQ(names_.to_plain(dirfd_, tampered, iv_), std::nullopt);

  // An entry decrypted first (a listing) gives the same entry back for its plaintext.
  const DiskName b = names_.to_disk("from-a-listing", other);
  NameMapping fresh(keys_);
  EXPECT_EQ(fresh.to_plain(dirfd_, b.entry, other), "from-a-listing");
  EXPECT_EQ(fresh.to_disk("from-a-listing", other).entry, b.entry);

  const std::string plain(200, 'l');
  const DiskName l = names_.to_disk(plain, iv_);
  ASSERT_TRUE(l.is_long);
  ASSERT_EQ(NameMapping::write_name_file(dirfd_, l), 0);
  EXPECT_EQ(names_.to_plain(dirfd_, l.entry, iv_), plain);
  ASSERT_EQ(NameMapping::remove_name_file(dirfd_, l), 0);
  EXPECT_EQ(names_.to_plain(dirfd_, l.entry, iv_), std::nullopt) << "its .name file is gone";
}

// A name made here is remembered both ways: a listing of the folder then finds its plaintext
// without decrypting it. A long name is not (its plaintext needs its .name file every time).
TEST_F(NameMappingTest, ANameMadeHereIsListedFromTheCache) {
  NameMapping fresh(keys_);
  const DiskName d = fresh.to_disk("made-here", iv_);
  ASSERT_FALSE(d.is_long);
  EXPECT_EQ(fresh.cache().find_plain(iv_, d.entry), "made-here");
  EXPECT_EQ(fresh.to_plain(dirfd_, d.entry, iv_), "made-here");
  const DiskName l = fresh.to_disk(std::string(200, 'm'), iv_);
  ASSERT_TRUE(l.is_long);
  EXPECT_EQ(fresh.cache().find_plain(iv_, l.entry), std::nullopt);
  EXPECT_EQ(fresh.cache().find_plain(iv_, l.encoded), std::nullopt);
  EXPECT_EQ(fresh.to_plain(dirfd_, l.entry, iv_), std::nullopt) << "no .name file written";
}

// The cache is bounded and never gives a wrong answer, however many names pass through it, and
// the same name under another IV is another name.
TEST(NameCacheTest, BoundedAndNeverWrong) {
  NameCache cache;
  DirIv iv{};
  const std::size_t n = NameCache::kSlots * 3;
  for (std::size_t i = 0; i < n; ++i) {
    cache.put_encoded(iv, "p" + std::to_string(i), "e" + std::to_string(i));
    cache.put_plain(iv, "e" + std::to_string(i), "p" + std::to_string(i));
  }
  std::size_t found = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (auto e = cache.find_encoded(iv, "p" + std::to_string(i))) {
      EXPECT_EQ(*e, "e" + std::to_string(i));
      ++found;
    }
    if (auto p = cache.find_plain(iv, "e" + std::to_string(i))) {
      EXPECT_EQ(*p, "p" + std::to_string(i));
    }
  }
  EXPECT_GT(found, 0u);
  EXPECT_LE(found, NameCache::kSlots);
  EXPECT_EQ(cache.find_encoded(iv, "p" + std::to_string(n - 1)), "e" + std::to_string(n - 1)) << "the newest stays";
  DirIv other{};
  other[0] = 1;
  EXPECT_EQ(cache.find_encoded(other, "p" + std::to_string(n - 1)), std::nullopt);
  cache.put_encoded(other, "p" + std::to_string(n - 1), "under the other IV");
  EXPECT_EQ(cache.find_encoded(other, "p" + std::to_string(n - 1)), "under the other IV");
}

}  // namespace
}  // namespace gcfs
