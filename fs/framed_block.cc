#include "fs/framed_block.h"

#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <stdexcept>

namespace gcfs {
namespace {

constexpr std::size_t kFixedBytes = 8 + 8 + 4;
constexpr std::size_t kDigestBytes = 32;

std::array<std::uint8_t, kDigestBytes> sha256(const std::uint8_t* p, std::size_t n) {
  std::array<std::uint8_t, kDigestBytes> d{};
  unsigned int len = 0;
  if (EVP_Digest(p, n, d.data(), &len, EVP_sha256(), nullptr) != 1 || len != d.size())
    throw std::runtime_error("SHA-256 failed in OpenSSL");
  return d;
}

}  // namespace

void put_be(std::uint8_t* p, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v);
}

std::uint64_t get_be(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

std::vector<std::uint8_t> encode_framed_block(std::span<const char, 8> magic, std::uint64_t generation,
                                              std::string_view body, std::size_t block_bytes) {
  if (body.size() + kFramedBlockOverhead > block_bytes) throw std::length_error("record too large for its block");
  std::vector<std::uint8_t> block(block_bytes, 0);
  std::memcpy(block.data(), magic.data(), magic.size());
  put_be(block.data() + 8, generation, 8);
  put_be(block.data() + 16, body.size(), 4);
  std::memcpy(block.data() + kFixedBytes, body.data(), body.size());
  const std::size_t end = kFixedBytes + body.size();
  const auto d = sha256(block.data(), end);
  std::memcpy(block.data() + end, d.data(), d.size());
  return block;
}

FramedBlock decode_framed_block(std::span<const std::uint8_t> block, std::span<const char, 8> magic) {
  FramedBlock r;
  if (block.size() < kFramedBlockOverhead || std::memcmp(block.data(), magic.data(), magic.size()) != 0) return r;
  r.state = FramedBlock::State::Damaged;
  const std::uint64_t len = get_be(block.data() + 16, 4);
  if (len > block.size() - kFramedBlockOverhead) {
    r.why = "its length field is impossible";
    return r;
  }
  const std::size_t end = kFixedBytes + len;
  const auto d = sha256(block.data(), end);
  if (std::memcmp(d.data(), block.data() + end, d.size()) != 0) {
    r.why = "its checksum does not match";
    return r;
  }
  r.state = FramedBlock::State::Valid;
  r.generation = get_be(block.data() + 8, 8);
  r.body.assign(reinterpret_cast<const char*>(block.data() + kFixedBytes), len);
  return r;
}

}  // namespace gcfs
