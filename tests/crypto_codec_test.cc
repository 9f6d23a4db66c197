// base64 / base64url, the name cipher, the blob cipher and the key ring: the encodings and key
// derivations that FORMAT.md fixes, so a vault written today opens tomorrow.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <thread>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/aes_gcm.h"
#include "crypto/aes_siv.h"
#include "crypto/base64url.h"
#include "crypto/blob_cipher.h"
#include "crypto/kdf.h"
#include "crypto/key_ring.h"
#include "crypto/name_cipher.h"
#include "crypto/random.h"

namespace gcfs {
namespace {

using Bytes = std::vector<std::uint8_t>;
using namespace std::string_view_literals;

Bytes str(std::string_view s) { return Bytes(s.begin(), s.end()); }

Bytes random_vec(std::mt19937& rng, std::size_t n) {
  Bytes b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

Bytes test_master(std::uint8_t seed) {
  Bytes m(kMasterKeyBytes);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<std::uint8_t>(seed + 31 * i);
  return m;
}

// ------------------------------------------------------------------------------------ base64

TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> std_vectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}};
  for (auto [plain, enc] : std_vectors) {
    EXPECT_EQ(base64_encode(str(plain)), enc);
    auto dec = base64_decode(enc);
    ASSERT_TRUE(dec.has_value()) << enc;
    EXPECT_EQ(*dec, str(plain));
  }
  const std::pair<const char*, const char*> url_vectors[] = {
      {"", ""}, {"f", "Zg"}, {"fo", "Zm8"}, {"foo", "Zm9v"}, {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"},
      {"foobar", "Zm9vYmFy"}};
  for (auto [plain, enc] : url_vectors) {
    EXPECT_EQ(base64url_encode(str(plain)), enc);
    auto dec = base64url_decode(enc);
    ASSERT_TRUE(dec.has_value()) << enc;
    EXPECT_EQ(*dec, str(plain));
  }
  // The two characters where the alphabets differ.
  const Bytes hi = {0xfb, 0xff, 0xbf};
  EXPECT_EQ(base64_encode(hi), "+/+/");
  EXPECT_EQ(base64url_encode(hi), "-_-_");
}

TEST(Base64, RoundTripsEveryLength) {
  std::mt19937 rng(1);
  for (std::size_t n = 0; n <= 200; ++n) {
    const Bytes data = random_vec(rng, n);
    const std::string u = base64url_encode(data);
    EXPECT_EQ(u.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
              std::string::npos);
    EXPECT_EQ(u.size(), (4 * n + 2) / 3);  // unpadded
    auto du = base64url_decode(u);
    ASSERT_TRUE(du.has_value()) << n;
    EXPECT_EQ(*du, data);
    const std::string s = base64_encode(data);
    EXPECT_EQ(s.size() % 4, 0u);
    auto ds = base64_decode(s);
    ASSERT_TRUE(ds.has_value()) << n;
    EXPECT_EQ(*ds, data);
  }
}

TEST(Base64, UrlRejectsNonCanonicalAndForeignInput) {
  for (std::string_view bad : {
           "A"sv,          // impossible length
           "Zm9vY"sv,      // impossible length
           "Zg=="sv,       // padding is not part of the unpadded form
           "Zg="sv,
           "Zh"sv,         // stray low bits: "Zg" is the one spelling of "f"
           "Zm9"sv,        // stray low bits: "Zm8" is the one spelling of "fo"
           "Zm+v"sv,       // standard alphabet
           "Zm/v"sv,
           "Zm9v "sv,      // whitespace
           " Zm9v"sv,
           "Zm9v\n"sv,
           "Zm\n9v"sv,
           "Zm.v"sv,
           "Zm9\0"sv,      // NUL
           "Zm9\xff"sv,    // not ASCII
       }) {
    EXPECT_FALSE(base64url_decode(bad).has_value()) << "accepted: " << bad;
  }
}

TEST(Base64, StandardRejectsNonCanonicalInput) {
  for (std::string_view bad : {
           "Zg"sv,        // unpadded
           "Zg="sv,
           "Zh=="sv,      // stray low bits
           "Zm9="sv,
           "===="sv,      // padding only
           "A==="sv,
           "AA=A"sv,      // padding in the middle
           "Zm9vYg==Zm9v"sv,
           "Zm9v===="sv,
           " Zm9v"sv,     // whitespace
           "Zm9v\n\n\n\n"sv,
           "Zm-v"sv,      // url alphabet
           "Zm_v"sv,
       }) {
    EXPECT_FALSE(base64_decode(bad).has_value()) << "accepted: " << bad;
  }
}

// ------------------------------------------------------------------------------------ names

class NameCipherTest : public ::testing::Test {
 protected:
  KeyRing keys{test_master(3)};
  NameCipher names{keys.names_key()};
  DirIv iv1{}, iv2{};
  void SetUp() override {
    for (std::size_t i = 0; i < kDirIvBytes; ++i) {
      iv1[i] = static_cast<std::uint8_t>(i);
      iv2[i] = static_cast<std::uint8_t>(i);
    }
    iv2[15] ^= 1;
  }
};

TEST_F(NameCipherTest, DeterministicPerDirectoryAndRoundTrips) {
  for (std::string name : {"a", "hello.txt", "with space", "ünïcödé", "..hidden", ".bashrc", "x.", "-_-"}) {
    const std::string e1 = names.encrypt(name, iv1);
    EXPECT_EQ(names.encrypt(name, iv1), e1) << name;
    EXPECT_NE(names.encrypt(name, iv2), e1) << name;
    // Never a dot or a slash: every dotted name in CIPHERDIR is gpucryptfs's own.
    EXPECT_EQ(e1.find_first_of("./=+"), std::string::npos) << e1;
    EXPECT_EQ(e1.size(), (4 * (name.size() + kSivTagBytes) + 2) / 3);
    auto back = names.decrypt(e1, iv1);
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(*back, name);
    // Moved into another directory: refused.
    EXPECT_FALSE(names.decrypt(e1, iv2).has_value()) << name;
  }
  EXPECT_NE(names.encrypt("a", iv1), names.encrypt("b", iv1));
}

TEST_F(NameCipherTest, LongestNameRoundTrips) {
  const std::string name(255, 'n');
  auto back = names.decrypt(names.encrypt(name, iv1), iv1);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, name);
}

TEST_F(NameCipherTest, TamperedTruncatedOrForeignNamesAreRefused) {
  const std::string e = names.encrypt("secret-plan.odt", iv1);
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  // Change each position to another alphabet character that keeps the encoding canonical: for the
  // last character only its high bits are significant, so flip the most significant one.
  for (std::size_t i = 0; i < e.size(); ++i) {
    std::string t = e;
    const std::size_t v = alphabet.find(t[i]);
    ASSERT_NE(v, std::string::npos);
    t[i] = alphabet[v ^ 0x20];
    EXPECT_FALSE(names.decrypt(t, iv1).has_value()) << "position " << i;
  }
  EXPECT_FALSE(names.decrypt(e.substr(0, e.size() - 2), iv1).has_value());
  EXPECT_FALSE(names.decrypt(e + "AA", iv1).has_value());
  EXPECT_FALSE(names.decrypt("", iv1).has_value());
  EXPECT_FALSE(names.decrypt("gpucryptfs.conf", iv1).has_value());
  EXPECT_FALSE(names.decrypt(base64url_encode(Bytes(16, 0)), iv1).has_value());  // a bare tag
  EXPECT_FALSE(names.decrypt(base64url_encode(Bytes(40, 0)), iv1).has_value());
  // A names key from another vault.
  KeyRing other(test_master(4));
  NameCipher other_names(other.names_key());
  EXPECT_FALSE(other_names.decrypt(e, iv1).has_value());
}

TEST_F(NameCipherTest, NamesNoDirectoryCanHoldAreRefusedOnDecrypt) {
  // Such a name could only come from a forged or foreign entry; the daemon must never be handed
  // "..", ".", or a path with a separator from a readdir.
  for (std::string_view bad : {"."sv, ".."sv, "/"sv, "a/b"sv, "../etc"sv, "a\0b"sv}) {
    const Bytes pt = str(bad);
    const std::string forged = base64url_encode(siv_encrypt(keys.names_key().bytes, iv1, pt));
    EXPECT_FALSE(names.decrypt(forged, iv1).has_value()) << "accepted a forged name of length " << bad.size();
  }
}

TEST_F(NameCipherTest, EmptyNameIsAnError) {
  EXPECT_THROW(names.encrypt("", iv1), std::invalid_argument);
}

// ------------------------------------------------------------------------------------ blobs

TEST(BlobCipher, SealOpenLayoutAndFreshNonces) {
  KeyRing keys(test_master(5));
  const Bytes aad = str("gpucryptfs symlink");
  for (std::size_t n : {0, 1, 15, 16, 17, 4096}) {
    Bytes pt(n);
    for (std::size_t i = 0; i < n; ++i) pt[i] = static_cast<std::uint8_t>(i * 3);
    const Bytes s1 = seal_blob(keys.blob_key(), aad, pt);
    const Bytes s2 = seal_blob(keys.blob_key(), aad, pt);
    ASSERT_EQ(s1.size(), kGcmNonceBytes + n + kGcmTagBytes);
    // Equal targets must not look equal on disk.
    EXPECT_NE(Bytes(s1.begin(), s1.begin() + 12), Bytes(s2.begin(), s2.begin() + 12));
    EXPECT_NE(s1, s2);
    for (const Bytes* s : {&s1, &s2}) {
      auto back = open_blob(keys.blob_key(), aad, *s);
      ASSERT_TRUE(back.has_value()) << n;
      EXPECT_EQ(*back, pt);
    }
    // The layout FORMAT.md promises: nonce || GCM ciphertext || tag.
    Bytes manual(n);
    EXPECT_TRUE(gcm_open(keys.blob_key().bytes, std::span(s1).first(12), aad, std::span(s1).subspan(12, n),
                         std::span(s1).last(16), manual.data()));
    EXPECT_EQ(manual, pt);
  }
}

TEST(BlobCipher, RefusesAnyChange) {
  KeyRing keys(test_master(6));
  const Bytes aad = str("user.gcfs.abc");
  const Bytes sealed = seal_blob(keys.blob_key(), aad, str("an xattr value"));
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    Bytes t = sealed;
    t[i] ^= 0x01;
    EXPECT_FALSE(open_blob(keys.blob_key(), aad, t).has_value()) << "byte " << i;
  }
  EXPECT_FALSE(open_blob(keys.blob_key(), str("user.gcfs.abd"), sealed).has_value());
  EXPECT_FALSE(open_blob(keys.blob_key(), aad, std::span(sealed).first(sealed.size() - 1)).has_value());
  EXPECT_FALSE(open_blob(keys.blob_key(), aad, Bytes(27, 0)).has_value());
  EXPECT_FALSE(open_blob(keys.blob_key(), aad, Bytes()).has_value());
  KeyRing other(test_master(7));
  EXPECT_FALSE(open_blob(other.blob_key(), aad, sealed).has_value());
}

// ------------------------------------------------------------------------------------ key ring

Bytes derive(const Bytes& master, const Bytes& salt, std::string_view info, std::size_t n) {
  SecretBytes k = hkdf_sha256(master, salt, str(info), n);
  return Bytes(k.begin(), k.end());
}

TEST(KeyRing, SubkeysAreTheHkdfLabelsOfTheFormat) {
  const Bytes master = test_master(9);
  KeyRing keys(master);
  FileId id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(0xA0 + i);
  const Bytes id_bytes(id.begin(), id.end());
  const ChunkKey ck = keys.content_key(id);
  EXPECT_EQ(Bytes(ck.bytes.begin(), ck.bytes.end()),
            derive(master, id_bytes, "gpucryptfs v1 content AES-256-GCM", 32));
  EXPECT_EQ(Bytes(keys.names_key().bytes.begin(), keys.names_key().bytes.end()),
            derive(master, {}, "gpucryptfs v1 names AES-256-SIV", 64));
  EXPECT_EQ(Bytes(keys.blob_key().bytes.begin(), keys.blob_key().bytes.end()),
            derive(master, {}, "gpucryptfs v1 metadata AES-256-GCM", 32));
}

TEST(KeyRing, DistinctKeysPerFileAndPurpose) {
  const Bytes master = test_master(10);
  KeyRing keys(master);
  std::set<Bytes> seen;
  seen.insert(master);
  seen.insert(Bytes(keys.names_key().bytes.begin(), keys.names_key().bytes.begin() + 32));
  seen.insert(Bytes(keys.names_key().bytes.begin() + 32, keys.names_key().bytes.end()));
  seen.insert(Bytes(keys.blob_key().bytes.begin(), keys.blob_key().bytes.end()));
  std::mt19937 rng(11);
  for (int i = 0; i < 64; ++i) {
    FileId id{};
    for (auto& b : id) b = static_cast<std::uint8_t>(rng());
    const ChunkKey k = keys.content_key(id);
    EXPECT_EQ(keys.content_key(id), k);  // deterministic: the file ID is all a reader has
    seen.insert(Bytes(k.bytes.begin(), k.bytes.end()));
  }
  EXPECT_EQ(seen.size(), 4u + 64u);
  // Another master key gives other subkeys for the same file ID.
  KeyRing other(test_master(11));
  FileId id{};
  EXPECT_NE(other.content_key(id), keys.content_key(id));
  EXPECT_NE(other.names_key(), keys.names_key());
}

// content_key reuses one OpenSSL context for every file (only the salt changes): each key is still
// the HKDF of its own file ID, one derivation after another and from several threads at once.
TEST(KeyRing, ContentKeysFromOneSharedContextAreEachFilesOwn) {
  const Bytes master = test_master(12);
  const KeyRing keys(master);
  constexpr int kThreads = 4, kEach = 200;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      for (int i = 0; i < kEach; ++i) {
        FileId id{};
        for (auto& b : id) b = static_cast<std::uint8_t>(rng());
        const ChunkKey k = keys.content_key(id);
        if (Bytes(k.bytes.begin(), k.bytes.end()) !=
            derive(master, Bytes(id.begin(), id.end()), "gpucryptfs v1 content AES-256-GCM", 32))
          ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

TEST(KeyRing, RejectsMasterKeyOfWrongSize) {
  EXPECT_THROW(KeyRing{Bytes(31)}, std::invalid_argument);
  EXPECT_THROW(KeyRing{Bytes(33)}, std::invalid_argument);
  EXPECT_THROW(KeyRing{Bytes{}}, std::invalid_argument);
}

// Nonces come from a per-thread pool of generator output: no value is ever handed out twice, and
// a child of fork() does not hand out what its parent's pool still holds (the parent would use
// the same bytes next, as nonces under the same keys).
TEST(PublicRandom, BytesNeverRepeatAndAForkedChildDrawsOthers) {
  std::set<Bytes> seen;
  for (int i = 0; i < 2000; ++i) {
    Bytes n(12);
    random_public_bytes(n);
    EXPECT_TRUE(seen.insert(n).second) << "a 12-byte value came twice";
  }
  Bytes big(2000);  // larger than the pool: straight from the generator
  random_public_bytes(big);
  EXPECT_TRUE(std::any_of(big.begin(), big.end(), [](std::uint8_t b) { return b != 0; }));

  Bytes warm(12);
  random_public_bytes(warm);  // this thread's pool now holds unused bytes
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Bytes child(12);
    random_public_bytes(child);
    const bool ok = ::write(fds[1], child.data(), child.size()) == static_cast<ssize_t>(child.size());
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  Bytes child(12);
  ASSERT_EQ(::read(fds[0], child.data(), child.size()), static_cast<ssize_t>(child.size()));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  Bytes parent(12);
  random_public_bytes(parent);
  EXPECT_NE(parent, child) << "parent and child handed out the same bytes";
}

}  // namespace
}  // namespace gcfs
