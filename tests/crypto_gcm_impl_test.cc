// The two AES-256-GCM implementations of the cpu engine (crypto/gcm_impl.h) must be one cipher:
// each passes the specification's vectors, what one seals the other opens (both ways, every chunk
// size and odd lengths, several AADs), and each refuses a changed tag, ciphertext or AAD and wipes
// its output. Where the build has no intel-ipsec-mb, its tests skip and say so.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "crypto/gcm_impl.h"

namespace gcfs {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes hex(std::string s) {
  std::erase(s, ' ');
  Bytes b(s.size() / 2);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(std::stoul(s.substr(2 * i, 2), nullptr, 16));
  return b;
}

const GcmImpl kImpls[] = {GcmImpl::OpenSsl, GcmImpl::IpsecMb};

const char* name(GcmImpl i) { return i == GcmImpl::IpsecMb ? "intel-ipsec-mb" : "OpenSSL"; }

bool skip_without(GcmImpl i) { return i == GcmImpl::IpsecMb && !gcm_ipsec_mb_compiled(); }

#define SKIP_WITHOUT_IPSEC_MB()                                                                       \
  if (!gcm_ipsec_mb_compiled()) GTEST_SKIP() << "built without intel-ipsec-mb (libipsec-mb-dev not found)"

// An op over caller-owned buffers.
struct Sealed {
  ChunkKey key;
  Bytes aad, plain, cipher;
  ChunkOp op;
};

Sealed make(std::mt19937& rng, std::size_t len, std::size_t aad_len) {
  Sealed s;
  for (auto& b : s.key.bytes) b = static_cast<std::uint8_t>(rng());
  s.aad.resize(aad_len);
  for (auto& b : s.aad) b = static_cast<std::uint8_t>(rng());
  s.plain.resize(len);
  for (auto& b : s.plain) b = static_cast<std::uint8_t>(rng());
  s.cipher.assign(len, 0);
  for (auto& b : s.op.nonce) b = static_cast<std::uint8_t>(rng());
  s.op.key = &s.key;
  s.op.aad = s.aad.data();
  s.op.aad_len = s.aad.size();
  s.op.in = s.plain.data();
  s.op.out = s.cipher.data();
  s.op.len = len;
  return s;
}

// Opens s's ciphertext with impl into a fresh buffer; returns whether it was accepted.
bool open_with(GcmImpl impl, const Sealed& s, Bytes* plain) {
  plain->assign(s.cipher.size(), 0x5A);
  ChunkOp op = s.op;
  op.in = s.cipher.data();
  op.out = plain->data();
  op.ok = false;
  gcm_open(impl, op);
  if (!op.ok) {
    EXPECT_EQ(*plain, Bytes(s.cipher.size(), 0)) << "output not wiped after a refused open";
  }
  return op.ok;
}

const std::size_t kLens[] = {0, 1, 15, 16, 17, 31, 33, 63, 255, 1000, 4095, 4096, 4097, 8191, 16384, 65535, 65536, 65537, 131072};
const std::size_t kAadLens[] = {0, 1, 12, 16, 24, 64};

// The specification's cases 13-16 ("The Galois/Counter Mode of Operation", AES-256, 96-bit IVs).
struct Vector {
  const char *key, *plaintext, *aad, *iv, *ciphertext, *tag;
};
constexpr const char* kKey15 = "feffe9928665731c6d6a8f9467308308 feffe9928665731c6d6a8f9467308308";
constexpr const char* kP60 =
    "d9313225f88406e5a55909c5aff5269a 86a7a9531534f7da2e4c303d8a318a72"
    "1c3c0c95956809532fcf0e2449a6b525 b16aedf5aa0de657ba637b39";
const Vector kVectors[] = {
    {"00000000000000000000000000000000 00000000000000000000000000000000", "", "", "000000000000000000000000", "",
     "530f8afbc74536b9a963b4f1c4cb738b"},
    {"00000000000000000000000000000000 00000000000000000000000000000000", "00000000000000000000000000000000", "",
     "000000000000000000000000", "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
    {kKey15,
     "d9313225f88406e5a55909c5aff5269a 86a7a9531534f7da2e4c303d8a318a72"
     "1c3c0c95956809532fcf0e2449a6b525 b16aedf5aa0de657ba637b391aafd255",
     "", "cafebabefacedbaddecaf888",
     "522dc1f099567d07f47f37a32a84427d 643a8cdcbfe5c0c97598a2bd2555d1aa"
     "8cb08e48590dbb3da7b08b1056828838 c5f61e6393ba7a0abcc9f662898015ad",
     "b094dac5d93471bdec1a502270e3cc6c"},
    {kKey15, kP60, "feedfacedeadbeeffeedfacedeadbeef abaddad2", "cafebabefacedbaddecaf888",
     "522dc1f099567d07f47f37a32a84427d 643a8cdcbfe5c0c97598a2bd2555d1aa"
     "8cb08e48590dbb3da7b08b1056828838 c5f61e6393ba7a0abcc9f662",
     "76fc6ece0f4e1768cddf8853bb2d551b"},
};

TEST(GcmImpl, EachPassesTheSpecificationVectors) {
  for (GcmImpl impl : kImpls) {
    if (skip_without(impl)) continue;
    SCOPED_TRACE(name(impl));
    for (const auto& v : kVectors) {
      ChunkKey key;
      const Bytes k = hex(v.key), pt = hex(v.plaintext), aad = hex(v.aad), iv = hex(v.iv), ct = hex(v.ciphertext),
                  tag = hex(v.tag);
      std::copy(k.begin(), k.end(), key.bytes.begin());
      Bytes out(pt.size(), 0);
      ChunkOp op;
      op.key = &key;
      std::copy(iv.begin(), iv.end(), op.nonce.begin());
      op.aad = aad.data();
      op.aad_len = aad.size();
      op.in = pt.data();
      op.out = out.data();
      op.len = pt.size();
      gcm_seal(impl, op);
      EXPECT_TRUE(op.ok);
      EXPECT_EQ(out, ct);
      EXPECT_EQ(Bytes(op.tag.begin(), op.tag.end()), tag);
      op.in = op.out = out.data();  // in place
      op.ok = false;
      gcm_open(impl, op);
      EXPECT_TRUE(op.ok);
      EXPECT_EQ(out, pt);
    }
  }
  if (!gcm_ipsec_mb_compiled()) GTEST_SKIP() << "OpenSSL checked; built without intel-ipsec-mb";
}

TEST(GcmImpl, WhatOneSealsTheOtherOpensBothWays) {
  SKIP_WITHOUT_IPSEC_MB();
  std::mt19937 rng(40);
  for (GcmImpl sealer : kImpls)
    for (std::size_t len : kLens)
      for (std::size_t aad_len : kAadLens) {
        const GcmImpl opener = sealer == GcmImpl::OpenSsl ? GcmImpl::IpsecMb : GcmImpl::OpenSsl;
        SCOPED_TRACE(std::string(name(sealer)) + " seals, len " + std::to_string(len) + ", aad " + std::to_string(aad_len));
        Sealed s = make(rng, len, aad_len);
        gcm_seal(sealer, s.op);
        ASSERT_TRUE(s.op.ok);
        // Bit-identical: the other seals the same bytes and tag.
        Sealed again = s;
        Bytes other(len, 0);
        again.op.key = &again.key;
        again.op.aad = again.aad.data();
        again.op.in = again.plain.data();
        again.op.out = other.data();
        gcm_seal(opener, again.op);
        EXPECT_EQ(other, s.cipher);
        EXPECT_EQ(again.op.tag, s.op.tag);
        Bytes plain;
        EXPECT_TRUE(open_with(opener, s, &plain));
        EXPECT_EQ(plain, s.plain);
      }
}

TEST(GcmImpl, EachRefusesAChangedTagCiphertextOrAad) {
  std::mt19937 rng(41);
  for (GcmImpl impl : kImpls) {
    if (skip_without(impl)) continue;
    for (std::size_t len : {std::size_t{0}, std::size_t{1}, std::size_t{17}, std::size_t{4096}, std::size_t{65536}}) {
      SCOPED_TRACE(std::string(name(impl)) + ", len " + std::to_string(len));
      Sealed s = make(rng, len, 24);
      gcm_seal(GcmImpl::OpenSsl, s.op);
      Bytes plain;
      ASSERT_TRUE(open_with(impl, s, &plain));
      for (std::size_t byte : {std::size_t{0}, std::size_t{7}, std::size_t{15}}) {
        Sealed t = s;
        t.op.key = &t.key;
        t.op.aad = t.aad.data();
        t.op.tag[byte] ^= 0x01;
        EXPECT_FALSE(open_with(impl, t, &plain)) << "tag byte " << byte;
      }
      if (len) {
        Sealed t = s;
        t.op.key = &t.key;
        t.op.aad = t.aad.data();
        t.cipher[len - 1] ^= 0x80;
        EXPECT_FALSE(open_with(impl, t, &plain)) << "ciphertext";
      }
      Sealed t = s;
      t.op.key = &t.key;
      t.aad[3] ^= 0x10;
      t.op.aad = t.aad.data();
      EXPECT_FALSE(open_with(impl, t, &plain)) << "AAD";
      t.aad[3] ^= 0x10;
      t.op.aad_len = 23;
      EXPECT_FALSE(open_with(impl, t, &plain)) << "shorter AAD";
      t.op.aad_len = 24;
      t.op.nonce[11] ^= 1;
      EXPECT_FALSE(open_with(impl, t, &plain)) << "nonce";
    }
  }
}

TEST(GcmImpl, KeyChangesBetweenChunksOnOneThreadUseTheNewKey) {
  SKIP_WITHOUT_IPSEC_MB();
  // The expanded-key cache must notice each change of key, back and forth.
  std::mt19937 rng(42);
  Sealed a = make(rng, 4096, 16), b = make(rng, 4096, 16);
  b.plain = a.plain;
  b.op.in = b.plain.data();
  b.op.nonce = a.op.nonce;
  for (int round = 0; round < 3; ++round)
    for (Sealed* s : {&a, &b}) {
      gcm_seal(GcmImpl::IpsecMb, s->op);
      Bytes plain;
      EXPECT_TRUE(open_with(GcmImpl::OpenSsl, *s, &plain));
    }
  EXPECT_NE(a.cipher, b.cipher);
}

TEST(GcmImpl, ChoiceIsNamed) {
  const std::string d = gcm_description();
  EXPECT_TRUE(d.starts_with("OpenSSL") || d.starts_with("intel-ipsec-mb, ")) << d;
  if (gcm_ipsec_mb_compiled()) {
    EXPECT_FALSE(gcm_ipsec_mb_isa().empty());
  }
}

}  // namespace
}  // namespace gcfs
