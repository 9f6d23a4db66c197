// Reverse mode's core without FUSE: the derivations pinned by known answers (a change would
// silently turn every incremental backup into a full one), the view's ciphertext read back
// through the forward ContentFile, and PLAINDIR's FIFOs and links never opened or followed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crypto/cpu_engine.h"
#include "fs/content/content_file.h"
#include "fs/name_mapping.h"
#include "fs/reverse_derivation.h"
#include "fs/reverse_view.h"
#include "fs/vault.h"

namespace gcfs {
namespace {

std::string hex(std::span<const std::uint8_t> b) {
  std::string out;
  char buf[3];
  for (auto c : b) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

std::span<const std::uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Values computed independently (Python's hmac and an RFC 5869 HKDF) for the master key 00..1f.
TEST(ReverseDerivation, KnownAnswers) {
  std::vector<std::uint8_t> master(32);
  for (std::size_t i = 0; i < master.size(); ++i) master[i] = static_cast<std::uint8_t>(i);
  const KeyRing keys(master);
  const ReverseDerivation d(keys);
  EXPECT_EQ(hex(d.dir_iv("")), "a3675132e190183814fb834ad6653ba5");
  EXPECT_EQ(hex(d.dir_iv("a/b")), "8faa15ca2c72d8a5fd0970cfecbfa727");
  const FileId id = d.file_id("a/b");
  EXPECT_EQ(hex(id), "e9b00fe51820181223c8f19a87584726");
  EXPECT_EQ(hex(d.chunk_nonce(id, 2, bytes_of("hello"))), "9bf033b453b68e4f0e835c88");
  EXPECT_EQ(hex(d.symlink_nonce("a/l", "target")), "3c121256098539432b8cd0c0");
  // The nonce follows the chunk's plaintext and position.
  EXPECT_NE(d.chunk_nonce(id, 2, bytes_of("hellp")), d.chunk_nonce(id, 2, bytes_of("hello")));
  EXPECT_NE(d.chunk_nonce(id, 3, bytes_of("hello")), d.chunk_nonce(id, 2, bytes_of("hello")));
}

class ReverseViewTest : public ::testing::Test {
 protected:
  ReverseViewTest() : engine_(2) {
    char templ[] = "/tmp/gcfs-reverse-view.XXXXXX";
    root_ = ::mkdtemp(templ);
    std::filesystem::create_directories(root_ + "/vault");
    std::filesystem::create_directories(plain());
    // A reverse view is always format 1 (init --reverse makes no other).
    Vault::create(root_ + "/vault", "pw", 4096, ScryptParams{10, 8, 1}, nullptr, "", kConfigFileName, kFormatVersion);
    vault_ = Vault::open(root_ + "/vault", Vault::load_config(root_ + "/vault"), "pw");
  }
  ~ReverseViewTest() override { std::filesystem::remove_all(root_); }
  std::string plain() const { return root_ + "/plain"; }
  std::unique_ptr<ReverseView> view() {
    return std::make_unique<ReverseView>(::open(plain().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC), *vault_, engine_,
                                         "{\"config\": true}");
  }

  std::string root_;
  CpuEngine engine_;
  std::unique_ptr<Vault> vault_;
};

TEST_F(ReverseViewTest, CiphertextReadsBackThroughTheForwardContentFile) {
  std::string data(3 * 4096 + 100, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
  { std::ofstream(plain() + "/f", std::ios::binary) << data; }
  auto v = view();
  UniqueFd fd;
  ASSERT_EQ(v->open_file("f", &fd), 0);
  const std::uint64_t size = vault_->layout().cipher_size(data.size());
  std::vector<std::uint8_t> whole(size);
  ASSERT_EQ(v->read(fd.get(), "f", 0, size + 100, whole.data()), static_cast<ssize_t>(size));
  // Any piece is the same bytes as the whole.
  for (auto [off, len] : {std::pair<std::uint64_t, std::size_t>{0, 24}, {7, 5000}, {4100, 4124}, {size - 3, 3}}) {
    std::vector<std::uint8_t> piece(len);
    ASSERT_EQ(v->read(fd.get(), "f", off, len, piece.data()), static_cast<ssize_t>(len));
    EXPECT_TRUE(std::equal(piece.begin(), piece.end(), whole.begin() + static_cast<std::ptrdiff_t>(off))) << off;
  }
  // The forward code opens it.
  const std::string copy = root_ + "/copy";
  { std::ofstream(copy, std::ios::binary).write(reinterpret_cast<const char*>(whole.data()), static_cast<std::streamsize>(size)); }
  const int cfd = ::open(copy.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(cfd, 0);
  {
    ContentFile cf(cfd, vault_->layout(), engine_, vault_->keys(), copy);
    std::string back(data.size(), '\0');
    ASSERT_EQ(cf.read(0, back.size(), reinterpret_cast<std::uint8_t*>(back.data())), static_cast<ssize_t>(data.size()));
    EXPECT_EQ(back, data);
  }
  ::close(cfd);
}

TEST_F(ReverseViewTest, FifosAreNeverOpenedAndLinksNeverFollowed) {
  ASSERT_EQ(::mkfifo((plain() + "/fifo").c_str(), 0600), 0);
  { std::ofstream(plain() + "/file") << "x"; }
  ASSERT_EQ(::symlink("file", (plain() + "/link").c_str()), 0);
  { std::ofstream(plain() + "/" + kReverseConfigName) << "{}"; }
  auto v = view();
  UniqueFd fd;
  EXPECT_EQ(v->open_file("fifo", &fd), -EACCES);  // would block here if it were opened
  EXPECT_EQ(v->open_file("link", &fd), -EACCES);
  EXPECT_EQ(v->open_file("file", &fd), 0);
  std::vector<ReverseEntry> entries;
  ASSERT_EQ(v->list("", &entries), 0);
  std::vector<std::string> names;
  for (const auto& e : entries) names.push_back(e.cipher_name);
  EXPECT_EQ(std::count(names.begin(), names.end(), "gpucryptfs.conf"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "gpucryptfs.diriv"), 1);
  EXPECT_EQ(entries.size(), 5u) << "the reverse config is shown, or an entry is missing";
  for (const auto& e : entries) EXPECT_NE(e.plain_name, kReverseConfigName);
}

TEST_F(ReverseViewTest, ShortAndLongSymlinkTargetsDecryptAsForwardModeReadsThem) {
  const std::string longt(4000, 'T');
  ASSERT_EQ(::symlink("short", (plain() + "/s").c_str()), 0);
  ASSERT_EQ(::symlink(longt.c_str(), (plain() + "/l").c_str()), 0);
  auto v = view();
  std::string link;
  ASSERT_EQ(v->link_of("s", &link), 0);
  EXPECT_EQ(vault_->names().decrypt_symlink(link).value_or("?"), "short");
  ASSERT_EQ(v->link_of("l", &link), 0);
  ASSERT_TRUE(link.starts_with(kLongTargetPrefix)) << link;
  std::vector<ReverseEntry> entries;
  ASSERT_EQ(v->list("", &entries), 0);
  auto it = std::find_if(entries.begin(), entries.end(), [&](const ReverseEntry& e) { return e.cipher_name == link; });
  ASSERT_NE(it, entries.end()) << "no long-target file for the link";
  EXPECT_EQ(vault_->names().decrypt_symlink(it->content).value_or("?"), longt);
  EXPECT_EQ(NameMapping::long_link(it->content).link, link) << "the file does not hash to the link";
}

}  // namespace
}  // namespace gcfs
