// A fixed-size block holding one copy of a small record that must survive a torn write: the volume
// header's config copies and the volume re-key's record. Two such blocks written in turn, each
// synced, always leave one whole copy (docs/FORMAT.md, "Volume mode").
//
//   magic (8) | be64 generation | be32 body length | body | SHA-256 of everything before it | zeros
//
// The checksum only tells a torn or damaged block from a whole one: anyone can compute it, so the
// body must be authenticated by what it holds (a key wrap, a MAC) before anything acts on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gcfs {

constexpr std::size_t kFramedBlockOverhead = 8 + 8 + 4 + 32;

// block_bytes bytes; throws std::length_error when the body does not fit.
std::vector<std::uint8_t> encode_framed_block(std::span<const char, 8> magic, std::uint64_t generation,
                                              std::string_view body, std::size_t block_bytes);

struct FramedBlock {
  enum class State { Empty, Damaged, Valid };
  State state = State::Empty;  // Empty: no magic (never written, wiped, or something else)
  std::uint64_t generation = 0;
  std::string body;
  std::string why;  // Damaged: "its checksum does not match", ...
};

FramedBlock decode_framed_block(std::span<const std::uint8_t> block, std::span<const char, 8> magic);

void put_be(std::uint8_t* p, std::uint64_t v, int bytes);
std::uint64_t get_be(const std::uint8_t* p, int bytes);

}  // namespace gcfs
