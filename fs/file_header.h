// The 24 bytes at the start of every non-empty ciphertext file:
//   magic "GCFS" (4) | version, big-endian (2) | reserved, zero (2) | file ID (16)
// (in format 2 they open the file's first metadata block).
// The random file ID selects the file's content key and is bound into every chunk's AAD, so a
// chunk copied into another file, or a header swapped between files, fails authentication.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "crypto/key_ring.h"
#include "fs/chunk_layout.h"

namespace gcfs {

// The header's version is the vault's content format (chunk_layout.h): 1 or 2.
constexpr std::uint16_t kFileHeaderVersion = 1;

struct FileHeader {
  FileId id{};

  static FileHeader random();
  std::array<std::uint8_t, kFileHeaderBytes> encode(std::uint16_t version = kFileHeaderVersion) const;
  // nullopt for a wrong magic, reserved field, or a version other than the one asked for: a
  // vault's files all have its format.
  static std::optional<FileHeader> decode(std::span<const std::uint8_t> bytes,
                                          std::uint16_t version = kFileHeaderVersion);
};

// The AAD of chunk k of a file: file ID || big-endian 64-bit k.
constexpr std::size_t kChunkAadBytes = kFileIdBytes + 8;
std::array<std::uint8_t, kChunkAadBytes> chunk_aad(const FileId& id, std::uint64_t chunk);

}  // namespace gcfs
