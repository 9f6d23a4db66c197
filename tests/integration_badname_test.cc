// mount --badname: a sync client's conflict copies of encrypted names (Dropbox's
// "<name> (conflicted copy ...)", Syncthing's "<name>.sync-conflict-...", on short and long names)
// are listed under their plaintext name with the appended text, read as the copied file, rename to
// a proper name and unlink; names that decrypt not at all are shown raw with the marker; and
// without --badname nothing changes but the log says each hidden name once.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

std::set<std::string> list_dir(const std::string& dir) {
  std::set<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string n = e->d_name; n != "." && n != "..") out.insert(n);
    ::closedir(d);
  }
  return out;
}

// The user's entries of a backing directory: neither our files nor long names' .name files.
std::set<std::string> user_entries(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : list_dir(dir))
    if (!e.starts_with("gpucryptfs.") && !e.ends_with(".name")) out.insert(e);
  return out;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const std::string kLong(180, 'L');
const std::string kDropbox = " (conflicted copy 2026-12-01)";
const std::string kSyncthing = ".sync-conflict-20261201-123456-ABCDEFG";

class BadName : public ::testing::Test {
 protected:
  BadName() : v_(options()) {
    // d/report.txt, d/<long name> and d/other.txt, whose ciphertext stands in for the version a
    // second machine wrote (content is not bound to its name: the header holds the file's ID).
    EXPECT_EQ(::mkdir(v_.path("d").c_str(), 0755), 0);
    write_file(v_.path("d/report.txt"), "mine\n");
    write_file(v_.path("d/" + kLong), "long mine\n");
    write_file(v_.path("d/other.txt"), "theirs\n");
    auto root = user_entries(v_.cipherdir());
    EXPECT_EQ(root.size(), 1u);
    dir_ = v_.cipherdir() + "/" + *root.begin();
    for (const auto& e : user_entries(dir_))
      if (e.starts_with("gcfs.longname.")) long_ = e;
    v_.unmount();
  }
  static VaultOptions options() {
    VaultOptions o;
    o.mount_args.push_back("--badname '*'");
    return o;
  }
  // The backing entry of d/NAME, found by renaming it away in the mount and seeing which goes.
  std::string entry_of(const std::string& name) {
    v_.mount();
    auto before = user_entries(dir_);
    EXPECT_EQ(::rename(v_.path("d/" + name).c_str(), v_.path("d/moved-for-probe").c_str()), 0);
    auto after = user_entries(dir_);
    EXPECT_EQ(::rename(v_.path("d/moved-for-probe").c_str(), v_.path("d/" + name).c_str()), 0);
    v_.unmount();
    for (const auto& e : before)
      if (!after.count(e)) return e;
    return "";
  }
  void copy_backing(const std::string& from, const std::string& to) {
    ASSERT_EQ(run_shell("cp -p " + shell_quote(dir_ + "/" + from) + " " + shell_quote(dir_ + "/" + to)).status, 0);
  }

  MountedVault v_;
  std::string dir_, long_;
};

TEST_F(BadName, ConflictCopiesOfBothShapesListReadRenameAndUnlink) {
  const std::string report = entry_of("report.txt"), other = entry_of("other.txt");
  ASSERT_FALSE(report.empty());
  ASSERT_FALSE(other.empty());
  ASSERT_FALSE(long_.empty());
  const std::string hash = long_.substr(std::string("gcfs.longname.").size());
  // Their version under our name with the clients' suffixes; a long name's .name file is shared.
  copy_backing(other, report + kDropbox);
  copy_backing(other, report + kSyncthing);
  copy_backing(long_, long_ + kDropbox);
  copy_backing(long_, "gcfs.longname" + kSyncthing + "." + hash);
  const std::string kDropboxLong = " (conflicted copy 2026-12-02)";  // Dropbox inserts before ".<hash>"
  copy_backing(long_, "gcfs.longname" + kDropboxLong + "." + hash);
  copy_backing(other, "NotOurs-at-all" + kDropbox);
  // fsck tells the copies from damage, and says what to do with them.
  auto fsck = run_shell(v_.binary() + " fsck --passfile " + shell_quote(v_.passfile()) + " " + shell_quote(v_.cipherdir()));
  EXPECT_EQ(fsck.status, 26) << fsck.output;
  EXPECT_EQ(count(fsck.output, "conflict copy of a name here"), 5u) << fsck.output;
  v_.mount();
  const std::set<std::string> want = {"report.txt", "other.txt", kLong,
                                      "report.txt" + kDropbox, "report.txt" + kSyncthing,
                                      kLong + kDropbox, kLong + kSyncthing, kLong + kDropboxLong,
                                      "NotOurs-at-all" + kDropbox + " GPUCRYPTFS_BAD_NAME"};
  EXPECT_EQ(list_dir(v_.path("d")), want);
  EXPECT_EQ(list_dir(v_.path("d")), want);
  EXPECT_EQ(count(v_.log(), report + kDropbox + ": does not decrypt; shown because of --badname"), 1u)
      << "said once, not per listing";
  EXPECT_EQ(v_.log().find("report.txt"), std::string::npos) << "no plaintext name in the log";
  EXPECT_EQ(read_file(v_.path("d/report.txt" + kDropbox)), "theirs\n");
  EXPECT_EQ(read_file(v_.path("d/report.txt" + kSyncthing)), "theirs\n");
  EXPECT_EQ(read_file(v_.path("d/" + kLong + kDropbox)), "long mine\n");
  EXPECT_EQ(read_file(v_.path("d/" + kLong + kSyncthing)), "long mine\n");
  EXPECT_EQ(read_file(v_.path("d/" + kLong + kDropboxLong)), "long mine\n");
  ASSERT_EQ(::unlink(v_.path("d/" + kLong + kDropboxLong).c_str()), 0) << errno;
  EXPECT_FALSE(exists(dir_ + "/gcfs.longname" + kDropboxLong + "." + hash));
  EXPECT_EQ(read_file(v_.path("d/NotOurs-at-all" + kDropbox + " GPUCRYPTFS_BAD_NAME")), "theirs\n");
  EXPECT_EQ(read_file(v_.path("d/report.txt")), "mine\n") << "the original is untouched";
  // Renamed to a proper name: encrypted again, and the copy's entry is gone.
  ASSERT_EQ(::rename(v_.path("d/report.txt" + kDropbox).c_str(), v_.path("d/report (theirs).txt").c_str()), 0) << errno;
  EXPECT_FALSE(exists(dir_ + "/" + report + kDropbox));
  ASSERT_EQ(::rename(v_.path("d/" + kLong + kSyncthing).c_str(), v_.path("d/long theirs").c_str()), 0) << errno;
  EXPECT_TRUE(exists(dir_ + "/" + long_ + ".name")) << "the original's .name file stays with it";
  ASSERT_EQ(::unlink(v_.path("d/report.txt" + kSyncthing).c_str()), 0) << errno;
  ASSERT_EQ(::unlink(v_.path("d/" + kLong + kDropbox).c_str()), 0) << errno;
  EXPECT_FALSE(exists(dir_ + "/" + report + kSyncthing));
  EXPECT_FALSE(exists(dir_ + "/" + long_ + kDropbox));
  EXPECT_EQ(read_file(v_.path("d/" + kLong)), "long mine\n");
  v_.remount();  // what the rename wrote is a proper name, found without --badname's guesses
  EXPECT_EQ(list_dir(v_.path("d")), (std::set<std::string>{"report.txt", "other.txt", kLong, "report (theirs).txt",
                                                           "long theirs",
                                                           "NotOurs-at-all" + kDropbox + " GPUCRYPTFS_BAD_NAME"}));
  EXPECT_EQ(read_file(v_.path("d/report (theirs).txt")), "theirs\n");
  EXPECT_EQ(read_file(v_.path("d/long theirs")), "long mine\n");
}

TEST_F(BadName, ACopyNamedLikeARealFileIsShownRawAndBothStayReachable) {
  const std::string report = entry_of("report.txt"), other = entry_of("other.txt");
  v_.mount();
  write_file(v_.path("d/report.txt" + kDropbox), "a real file of that name\n");
  v_.unmount();
  copy_backing(other, report + kDropbox);  // the copy arrives after the real file was made
  v_.mount();
  const std::string raw = report + kDropbox + " GPUCRYPTFS_BAD_NAME";
  auto names = list_dir(v_.path("d"));
  EXPECT_TRUE(names.count("report.txt" + kDropbox));
  EXPECT_TRUE(names.count(raw));
  EXPECT_EQ(read_file(v_.path("d/report.txt" + kDropbox)), "a real file of that name\n");
  EXPECT_EQ(read_file(v_.path("d/" + raw)), "theirs\n");
}

TEST_F(BadName, LookupsOfNewNamesStillCreateProperEntries) {
  v_.mount();
  // A new name that no copy stands for: created as itself, under its own encrypted name.
  write_file(v_.path("d/fresh (conflicted copy 2026-12-01)"), "new\n");
  v_.unmount();
  for (const auto& e : user_entries(dir_)) EXPECT_EQ(e.find(' '), std::string::npos) << e;
  v_.mount();
  EXPECT_EQ(read_file(v_.path("d/fresh (conflicted copy 2026-12-01)")), "new\n");
  struct stat st {};
  EXPECT_NE(::stat(v_.path("d/nothing here").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
}

TEST(BadNameOff, HiddenNamesAreLoggedOncePerNameAndNeverBreakTheListing) {
  MountedVault v;
  write_file(v.path("kept"), "x\n");
  v.unmount();
  write_file(v.cipherdir() + "/NotOurs-at-all (conflicted copy)", "junk");
  write_file(v.cipherdir() + "/AlsoNotOurs", "junk");
  v.mount();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(list_dir(v.mountpoint()), (std::set<std::string>{"kept"}));
  const std::string log = v.log();
  EXPECT_EQ(count(log, "do not decrypt"), 1u) << log;
  EXPECT_EQ(count(log, "2 entries do not decrypt"), 1u) << log;
  EXPECT_NE(log.find("--badname"), std::string::npos) << "the log names the option that shows them";
}

TEST(BadNameCli, AnEmptyPatternIsAUsageError) {
  VaultOptions o;
  o.mount = false;
  MountedVault v(o);
  auto r = run_shell(v.mount_command() + " --badname ''");
  EXPECT_EQ(r.status, 2) << r.output;
}

}  // namespace
}  // namespace gcfs::test
