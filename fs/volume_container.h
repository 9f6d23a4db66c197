// A volume container: one file holding an encrypted block volume (docs/FORMAT.md, "Volume mode").
//
//   config block (64 KiB)                          | content stream (base offset 64 KiB)
//   slot 0 (4 KiB) | slot 1 (4 KiB) | zeros ...     | file header (24) | chunk 0 | chunk 1 | ...
//
// Each slot holds a complete copy of the vault config (the same JSON as gpucryptfs.conf, with
// kind "volume" and volume_size) behind a magic, a generation number and a SHA-256 checksum.
// Updates go to the older slot and are fsynced, so a crash while resizing leaves the previous
// config readable. The content stream is exactly a directory vault's file format, so the chunk
// code (ContentFile) reads and writes it unchanged; unwritten chunks are holes in a sparse file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "crypto/kdf.h"
#include "crypto/secret.h"
#include "crypto/vault_config.h"
#include "fs/chunk_layout.h"

namespace gcfs {

constexpr std::uint64_t kVolumeConfigBlockBytes = 64 * 1024;  // the content stream's base offset
constexpr std::uint64_t kVolumeSlotBytes = 4096;
constexpr int kVolumeSlots = 2;
constexpr char kVolumeMagic[8] = {'G', 'C', 'F', 'S', 'V', 'O', 'L', '1'};

// The plaintext size a volume of `requested` bytes gets: rounded up to whole chunks, so that
// growing it never reseals a partial last chunk. Throws UserError for 0.
std::uint64_t volume_size_for(std::uint64_t requested, std::uint32_t chunk_size);

class VolumeContainer {
 public:
  // Creates path (which must not exist), sparse: the config slots, the content stream's header
  // and holes for size bytes. Throws UserError naming the problem; leaves no file behind on error.
  static void create(const std::string& path, const VaultConfig& config);

  // Opens an existing container and reads its newest valid config slot. writable: open read-write
  // and take an exclusive lock, so two mounts (or a mount and a resize) never share a container.
  // Throws CorruptData when no slot is valid, UserError when the file is not a container or is busy.
  VolumeContainer(const std::string& path, bool writable);
  ~VolumeContainer();
  VolumeContainer(VolumeContainer&& o) noexcept;
  VolumeContainer(const VolumeContainer&) = delete;
  VolumeContainer& operator=(const VolumeContainer&) = delete;
  VolumeContainer& operator=(VolumeContainer&&) = delete;

  const VaultConfig& config() const { return config_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  ChunkLayout layout() const { return ChunkLayout(config_.chunk_size, kVolumeConfigBlockBytes); }

  // Checks that the content stream is as long as the config's volume_size says. A longer stream
  // is an interrupted resize: on a writable container it is cut back (chunk-aligned, so no chunk
  // changes). A shorter one is damage and throws CorruptData.
  void check_stream_size();

  // Checks the content stream's file header (magic, version) behind the config block. Without
  // it every chunk read fails, so a damaged one is refused up front: throws CorruptData.
  void check_content_header() const;

  // Grows the volume to new_size plaintext bytes (already a whole number of chunks): the stream
  // grows by holes first, then the config, rewrapped under password so volume_size stays
  // authenticated, goes to the older slot. Throws UserError when new_size is smaller, and
  // WrongPassword when password does not open the config.
  void grow(std::uint64_t new_size, std::string_view password);

 private:
  void write_slot(const VaultConfig& config);

  std::string path_;
  int fd_ = -1;
  VaultConfig config_;
  std::uint64_t generation_ = 0;
  int slot_ = 0;  // the slot config_ came from
};

}  // namespace gcfs
