// The power-cut harness's model alone (tests/powercut/volatile_disk.h), without FUSE: what fsync
// makes durable, what a cut keeps of the unsynced pieces, and where an armed cut lands.
#include <gtest/gtest.h>

#include <string>

#include "powercut/volatile_disk.h"

namespace powercut {
namespace {

std::string contents(const VolatileDisk& d, const std::string& path) {
  const std::int64_t ino = d.resolve(path);
  return ino < 0 ? "<" + std::to_string(ino) + ">" : d.node(static_cast<Ino>(ino))->data;
}

// A durable file "/f" of `size` bytes of 'a' (file and root fsynced).
Ino durable_file(VolatileDisk& d, std::size_t size) {
  const Ino f = static_cast<Ino>(d.create(kRootIno, "f", S_IFREG | 0600, 0, "", 0, 0));
  const std::string a(size, 'a');
  EXPECT_EQ(d.write(f, 0, a.data(), a.size()), static_cast<std::int64_t>(size));
  EXPECT_EQ(d.fsync(f), 0);
  EXPECT_EQ(d.fsync(kRootIno), 0);
  return f;
}

void write_str(VolatileDisk& d, Ino f, std::uint64_t off, const std::string& s) {
  ASSERT_EQ(d.write(f, off, s.data(), s.size()), static_cast<std::int64_t>(s.size()));
}

TEST(PowercutModel, CutDropLosesWhatNoFsyncCovered) {
  VolatileDisk d;
  const Ino f = durable_file(d, 1000);
  write_str(d, f, 10, "bbbb");
  write_str(d, f, 1000, "tail");
  ASSERT_GT(d.create(kRootIno, "new", S_IFREG | 0600, 0, "", 0, 0), 0);
  ASSERT_EQ(d.truncate(f, 2000), 0);
  d.cut(Tear{});
  EXPECT_TRUE(d.dead());
  EXPECT_EQ(d.write(f, 0, "x", 1), -EIO);
  d.boot();
  EXPECT_EQ(contents(d, "/f"), std::string(1000, 'a'));
  EXPECT_EQ(d.resolve("/new"), -ENOENT);
}

TEST(PowercutModel, KeptPiecesLandInPlaceButGrowthNeedsAnFsync) {
  VolatileDisk d;
  const Ino f = durable_file(d, 1000);
  write_str(d, f, 990, std::string(20, 'b'));  // 10 bytes in place, 10 past the durable end
  d.cut(Tear{Tear::Kind::all, 0});
  d.boot();
  EXPECT_EQ(contents(d, "/f"), std::string(990, 'a') + std::string(10, 'b'));
}

TEST(PowercutModel, PiecesAreWritesSplitAtSectorBoundaries) {
  VolatileDisk d;
  const Ino f = durable_file(d, 4096);
  write_str(d, f, 100, std::string(1000, 'b'));  // [100,512) [512,1024) [1024,1100)
  EXPECT_EQ(d.pending_pieces(), 3u);
  d.cut(Tear{Tear::Kind::prefix, 2});
  d.boot();
  const std::string got = contents(d, "/f");
  EXPECT_EQ(got.substr(0, 100), std::string(100, 'a'));
  EXPECT_EQ(got.substr(100, 924), std::string(924, 'b'));
  EXPECT_EQ(got.substr(1024), std::string(3072, 'a'));
}

TEST(PowercutModel, SubsetIsChosenBySeedAlone) {
  auto run = [](std::uint64_t seed) {
    VolatileDisk d;
    const Ino f = durable_file(d, 8192);
    write_str(d, f, 0, std::string(8192, 'b'));
    d.cut(Tear{Tear::Kind::subset, seed});
    d.boot();
    return contents(d, "/f");
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), std::string(8192, 'a'));  // 16 pieces: some land, some do not (for this seed)
  EXPECT_NE(run(7), std::string(8192, 'b'));
}

TEST(PowercutModel, NamesAreDurableWithTheirDirectoryAndContentsWithTheFile) {
  VolatileDisk d;
  durable_file(d, 10);
  const Ino g = static_cast<Ino>(d.create(kRootIno, "g", S_IFREG | 0600, 0, "", 0, 0));
  write_str(d, g, 0, "unsynced");
  ASSERT_EQ(d.rename(kRootIno, "f", kRootIno, "renamed", 0), 0);
  ASSERT_EQ(d.fsync(kRootIno), 0);  // the names, not g's data
  ASSERT_GT(d.create(kRootIno, "sub", S_IFDIR | 0700, 0, "", 0, 0), 0);  // after the fsync: lost
  d.cut(Tear{});
  d.boot();
  EXPECT_EQ(contents(d, "/g"), "");
  EXPECT_EQ(contents(d, "/renamed"), std::string(10, 'a'));
  EXPECT_EQ(d.resolve("/f"), -ENOENT);
  EXPECT_EQ(d.resolve("/sub"), -ENOENT);
}

TEST(PowercutModel, ARenameWithoutADirectoryFsyncIsUndone) {
  VolatileDisk d;
  durable_file(d, 10);
  ASSERT_EQ(d.rename(kRootIno, "f", kRootIno, "renamed", 0), 0);
  d.cut(Tear{Tear::Kind::all, 0});
  d.boot();
  EXPECT_EQ(contents(d, "/f"), std::string(10, 'a'));
  EXPECT_EQ(d.resolve("/renamed"), -ENOENT);
}

TEST(PowercutModel, AnArmedCutKeepsEarlierWritesAndTearsTheNth) {
  VolatileDisk d;
  const Ino f = durable_file(d, 2048);
  d.arm(2, Tear{Tear::Kind::prefix, 1}, true);
  write_str(d, f, 0, std::string(512, 'b'));
  EXPECT_EQ(d.write(f, 1024, std::string(1024, 'c').data(), 1024), -EIO);  // the 2nd: the cut
  EXPECT_TRUE(d.dead());
  d.boot();
  EXPECT_EQ(contents(d, "/f"), std::string(512, 'b') + std::string(512, 'a') + std::string(512, 'c') +
                                   std::string(512, 'a'));
}

TEST(PowercutModel, AnArmedCutCanDropTheEarlierWrites) {
  VolatileDisk d;
  const Ino f = durable_file(d, 1024);
  d.arm(2, Tear{Tear::Kind::all, 0}, false);
  write_str(d, f, 0, std::string(512, 'b'));
  EXPECT_EQ(d.write(f, 512, std::string(512, 'c').data(), 512), -EIO);
  d.boot();
  EXPECT_EQ(contents(d, "/f"), std::string(512, 'a') + std::string(512, 'c'));
}

TEST(PowercutModel, TearWordsParse) {
  EXPECT_EQ(parse_tear("none")->kind, Tear::Kind::none);
  EXPECT_EQ(parse_tear("prefix:3")->count_or_seed, 3u);
  EXPECT_EQ(parse_tear("subset:9")->kind, Tear::Kind::subset);
  EXPECT_FALSE(parse_tear("prefix:"));
  EXPECT_FALSE(parse_tear("prefix:-1"));
  EXPECT_FALSE(parse_tear("half"));
}

}  // namespace
}  // namespace powercut
