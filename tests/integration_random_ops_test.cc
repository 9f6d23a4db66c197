// A seeded random-operation exerciser: writes, reads, truncations, appends, renames and unlinks
// at random offsets and sizes that cross chunk boundaries, checked against a shadow copy in
// memory after every step and again after an unmount and mount. GCFS_SEED=N picks one seed.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/mounted_vault.h"

namespace gcfs::test {
namespace {

constexpr std::size_t kChunk = 4096;

class RandomOps : public ::testing::TestWithParam<unsigned> {
 protected:
  static VaultOptions small_chunks() {
    VaultOptions o;
    o.chunk_size = kChunk;
    return o;
  }
  MountedVault v_{small_chunks()};
  std::map<std::string, std::string> shadow_;
  std::mt19937_64 rng_;

  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
  // Sizes and offsets near chunk boundaries are the interesting ones.
  std::size_t interesting(std::size_t max_chunks) {
    std::size_t base = pick(max_chunks + 1) * kChunk;
    switch (pick(4)) {
      case 0: return base;
      case 1: return base + 1;
      case 2: return base > 0 ? base - 1 : 0;
      default: return base + pick(kChunk);
    }
  }
  std::string bytes(std::size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng_());
    return s;
  }
  std::string name(std::size_t i) { return i < 4 ? "f" + std::to_string(i) : std::string(180 + i, 'L'); }

  void step(std::string& what) {
    const std::string n = name(pick(6));
    const std::string path = v_.path(n);
    auto it = shadow_.find(n);
    switch (pick(7)) {
      case 0:
      case 1: {  // write
        const std::size_t off = interesting(6), len = std::max<std::size_t>(1, interesting(3));
        what = "write " + n + " off " + std::to_string(off) + " len " + std::to_string(len);
        std::string data = bytes(len);
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
        ASSERT_GE(fd, 0) << what;
        ASSERT_EQ(::pwrite(fd, data.data(), len, static_cast<off_t>(off)), static_cast<ssize_t>(len)) << what;
        ::close(fd);
        std::string& s = shadow_[n];
        if (s.size() < off + len) s.resize(off + len, '\0');
        s.replace(off, len, data);
        break;
      }
      case 2: {  // truncate
        const std::size_t size = interesting(6);
        what = "truncate " + n + " to " + std::to_string(size);
        if (it == shadow_.end()) return;
        ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0) << what;
        it->second.resize(size, '\0');
        break;
      }
      case 3: {  // append
        const std::size_t len = std::max<std::size_t>(1, interesting(2));
        what = "append " + n + " len " + std::to_string(len);
        std::string data = bytes(len);
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        ASSERT_GE(fd, 0) << what;
        ASSERT_EQ(::write(fd, data.data(), len), static_cast<ssize_t>(len)) << what;
        ::close(fd);
        shadow_[n] += data;
        break;
      }
      case 4: {  // rename, possibly over another file
        const std::string to = name(pick(6));
        what = "rename " + n + " -> " + to;
        if (it == shadow_.end() || to == n) return;
        ASSERT_EQ(::rename(path.c_str(), v_.path(to).c_str()), 0) << what;
        std::string moved = std::move(it->second);
        shadow_.erase(it);
        shadow_[to] = std::move(moved);
        break;
      }
      case 5: {  // unlink
        what = "unlink " + n;
        if (it == shadow_.end()) return;
        ASSERT_EQ(::unlink(path.c_str()), 0) << what;
        shadow_.erase(it);
        break;
      }
      default: {  // a read of a random range
        what = "read " + n;
        if (it == shadow_.end()) return;
        const std::size_t off = interesting(6), len = std::max<std::size_t>(1, interesting(3));
        std::string buf(len, '\0');
        int fd = ::open(path.c_str(), O_RDONLY);
        ASSERT_GE(fd, 0) << what;
        ssize_t got = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
        ::close(fd);
        const std::string& s = it->second;
        const std::size_t want = off >= s.size() ? 0 : std::min(len, s.size() - off);
        ASSERT_EQ(got, static_cast<ssize_t>(want)) << what;
        ASSERT_EQ(buf.substr(0, want), s.substr(std::min(off, s.size()), want)) << what;
      }
    }
  }

  void compare_all(const std::string& after) {
    std::size_t present = 0;
    for (std::size_t i = 0; i < 6; ++i) {
      const std::string n = name(i);
      struct stat st {};
      const bool exists = ::stat(v_.path(n).c_str(), &st) == 0;
      auto it = shadow_.find(n);
      ASSERT_EQ(exists, it != shadow_.end()) << n << " after " << after;
      if (!exists) continue;
      ++present;
      ASSERT_EQ(static_cast<std::size_t>(st.st_size), it->second.size()) << n << " after " << after;
      ASSERT_TRUE(read_file(v_.path(n)) == it->second) << n << " differs after " << after;
    }
    std::size_t listed = 0;
    DIR* d = ::opendir(v_.mountpoint().c_str());
    ASSERT_NE(d, nullptr);
    while (dirent* e = ::readdir(d)) listed += e->d_name[0] != '.';
    ::closedir(d);
    ASSERT_EQ(listed, present) << "after " << after;
  }
};

TEST_P(RandomOps, MatchesShadowCopyAcrossRemounts) {
  rng_.seed(GetParam());
  std::string what;
  for (int i = 0; i < 500; ++i) {
    ASSERT_NO_FATAL_FAILURE(step(what)) << "seed " << GetParam() << " step " << i;
    ASSERT_NO_FATAL_FAILURE(compare_all(what)) << "seed " << GetParam() << " step " << i;
    if (i == 250) {
      v_.remount();
      ASSERT_NO_FATAL_FAILURE(compare_all("remount")) << "seed " << GetParam();
    }
  }
  v_.remount();
  ASSERT_NO_FATAL_FAILURE(compare_all("final remount")) << "seed " << GetParam();
}

std::vector<unsigned> seeds() {
  if (const char* s = std::getenv("GCFS_SEED")) return {static_cast<unsigned>(std::strtoul(s, nullptr, 10))};
  return {1, 2, 3};
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomOps, ::testing::ValuesIn(seeds()));

}  // namespace
}  // namespace gcfs::test
