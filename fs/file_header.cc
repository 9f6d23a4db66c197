#include "fs/file_header.h"

#include <algorithm>

#include "crypto/random.h"

namespace gcfs {
namespace {
constexpr std::array<std::uint8_t, 4> kMagic = {'G', 'C', 'F', 'S'};
}

FileHeader FileHeader::random() {
  FileHeader h;
  random_bytes(h.id);
  return h;
}

std::array<std::uint8_t, kFileHeaderBytes> FileHeader::encode(std::uint16_t version) const {
  std::array<std::uint8_t, kFileHeaderBytes> out{};
  std::copy(kMagic.begin(), kMagic.end(), out.begin());
  out[4] = static_cast<std::uint8_t>(version >> 8);
  out[5] = static_cast<std::uint8_t>(version & 0xff);
  std::copy(id.begin(), id.end(), out.begin() + 8);
  return out;
}

std::optional<FileHeader> FileHeader::decode(std::span<const std::uint8_t> b, std::uint16_t version) {
  if (b.size() < kFileHeaderBytes) return std::nullopt;
  if (!std::equal(kMagic.begin(), kMagic.end(), b.begin())) return std::nullopt;
  if (b[4] != (version >> 8) || b[5] != (version & 0xff)) return std::nullopt;
  if (b[6] != 0 || b[7] != 0) return std::nullopt;
  FileHeader h;
  std::copy(b.begin() + 8, b.begin() + 24, h.id.begin());
  return h;
}

std::array<std::uint8_t, kChunkAadBytes> chunk_aad(const FileId& id, std::uint64_t chunk) {
  std::array<std::uint8_t, kChunkAadBytes> aad{};
  std::copy(id.begin(), id.end(), aad.begin());
  for (int i = 0; i < 8; ++i) aad[kFileIdBytes + i] = static_cast<std::uint8_t>(chunk >> (56 - 8 * i));
  return aad;
}

}  // namespace gcfs
