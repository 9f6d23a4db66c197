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
//
// Authenticate, then act: the checksum only tells a torn slot from a whole one, and anyone who
// can write the container can write a slot with a valid checksum. So nothing a slot says is acted
// on (the stream cut back to its size, a resize) before unlock() has opened its key wrap; a newest
// slot that does not open is passed over for the other copy, with a warning.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/chunk_engine.h"
#include "crypto/kdf.h"
#include "crypto/key_ring.h"
#include "crypto/secret.h"
#include "crypto/vault_config.h"
#include "fs/chunk_layout.h"
#include "fs/file_header.h"

namespace gcfs {

constexpr std::uint64_t kVolumeConfigBlockBytes = 64 * 1024;  // the content stream's base offset
constexpr std::uint64_t kVolumeSlotBytes = 4096;
constexpr int kVolumeSlots = 2;
constexpr char kVolumeMagic[8] = {'G', 'C', 'F', 'S', 'V', 'O', 'L', '1'};
// The magic of a header copy while a re-key is in progress (fs/volume_rekey.h): a release that
// knows no re-key finds no header and refuses the container ("not a volume container") instead of
// mounting a volume whose chunks are under two keys.
constexpr char kVolumeRekeyingMagic[8] = {'G', 'C', 'F', 'S', 'V', 'R', 'K', '1'};

// The plaintext size a volume of `requested` bytes gets: rounded up to whole chunks, so that
// growing it never reseals a partial last chunk. Throws UserError for 0.
std::uint64_t volume_size_for(std::uint64_t requested, std::uint32_t chunk_size);

// One copy of the config that passed its checksum and parsed: not yet authenticated.
struct VolumeHeaderCopy {
  int slot = 0;
  std::uint64_t generation = 0;
  VaultConfig config;
  bool rekeying = false;  // written with kVolumeRekeyingMagic
};

// What the two slots hold, before any password.
struct VolumeHeader {
  std::vector<VolumeHeaderCopy> copies;  // newest (highest generation) first; ties: lower slot first
  std::string damage;                    // "copy 0: its checksum does not match; ...", empty when none
  int empty = 0;                         // slots without the magic (never written, or not a container)
  bool rekeying = false;                 // a whole copy says a re-key is in progress
};

// The bytes of one slot holding config at generation (for create, resize, tests and the fuzzer).
// A config with key slots is stored compact; UserError when it does not fit the slot's 4 KiB
// (14 key slots: docs/FORMAT.md).
std::vector<std::uint8_t> encode_volume_slot(const VaultConfig& config, std::uint64_t generation, bool rekeying = false);

// Decodes the first kVolumeSlots * kVolumeSlotBytes bytes of a container (a shorter span counts
// the missing slots as empty). Damage is reported in the result, never thrown; only a slot of a
// newer format version (UserError) escapes.
VolumeHeader decode_volume_header(std::span<const std::uint8_t> block);

// Refuses (ExpensiveKdf, naming the cost) when every copy asks for a scrypt cost above what
// init creates and policy does not allow it: what unlock() would find, without a password.
void check_kdf_cost(const VolumeHeader& header, KdfPolicy policy);

class VolumeContainer {
 public:
  // Creates path (which must not exist), sparse: the config slots, the content stream's header
  // and holes for size bytes. Throws UserError naming the problem; leaves no file behind on error.
  static void create(const std::string& path, const VaultConfig& config);

  // Opens an existing container and reads its header. path is a file the user named, so a
  // symbolic link is followed; a FIFO, device or directory is refused at once (opened
  // non-blocking, type checked before anything is read or locked). writable: open read-write and
  // take an exclusive lock, so two mounts (or a mount and a resize) never share a container.
  // Throws CorruptData when no slot is valid, UserError when the file is not a container or is
  // busy. Nothing is written.
  // A container in the middle of a re-key (its header copies or its re-key record say so) is
  // refused with a UserError that says to run `volume rekey` again, unless rekey is true (the
  // re-key itself).
  VolumeContainer(const std::string& path, bool writable, bool rekey = false);
  // The header alone, opened as the constructor does but without a lock and without logging: for
  // a command that answers before the password prompt (a FIFO, a damaged header, a refused
  // scrypt cost) and leaves the real open to the process that mounts. Same errors.
  static VolumeHeader read_header(const std::string& path);
  ~VolumeContainer();
  VolumeContainer(VolumeContainer&& o) noexcept;
  VolumeContainer(const VolumeContainer&) = delete;
  VolumeContainer& operator=(const VolumeContainer&) = delete;
  VolumeContainer& operator=(VolumeContainer&&) = delete;

  // Before unlock(): the newest copy, unauthenticated (fit for messages and early usage checks,
  // not to act on). After: the copy whose key wrap opened.
  const VaultConfig& config() const { return config_; }
  const VolumeHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  ChunkLayout layout() const { return ChunkLayout(config_.chunk_size, kVolumeConfigBlockBytes); }
  bool unlocked() const { return unlocked_; }

  // gcfs::check_kdf_cost on this container's header.
  void check_kdf_cost(KdfPolicy policy) const;

  // Authenticates the header: tries the copies newest first (a copy identical to one already
  // tried is not tried again; one whose scrypt cost policy refuses is passed over) and keeps the
  // first whose key wrap opens with password. When that is not the newest, logs a warning naming
  // the copy passed over and why. Returns the master key. Throws WrongPassword when no copy
  // opens, ExpensiveKdf when every copy's cost was refused.
  // secret: a password or a key file's content (kind).
  SecretBytes unlock(std::string_view secret, KdfPolicy policy = KdfPolicy::RefuseAboveInit,
                     KeySlotKind kind = KeySlotKind::Password);
  // After unlock(): the key slot that opened it (-1: a config of version 1).
  int opened_slot() const { return opened_slot_; }

  // Checks that the content stream is as long as the config's volume_size says; needs unlock().
  // A longer stream is an interrupted resize: on a writable container whose newest header copy
  // was the one that opened and whose other copy is whole, it is cut back (chunk-aligned, so no
  // chunk changes); otherwise the excess may belong to a larger volume described by the copy that
  // could not be used, and it is left alone with a warning. A shorter one is damage: CorruptData.
  void check_stream_size();

  // Checks that keys open the volume's data: the first few written chunks (holes skipped). Throws
  // CorruptData when some were tried and none opened: an old copy of the header, from before a
  // `volume rekey`, or damage, either of which would make every read an error. An empty volume passes.
  void check_key_opens_data(const KeyRing& keys, ChunkEngine& engine) const;

  // Checks the content stream's file header (magic, version) behind the config block and returns
  // it (its file ID keys the stream). Without it every chunk read fails, so a damaged one is
  // refused up front: throws CorruptData.
  FileHeader check_content_header() const;

  // Grows the volume to new_size plaintext bytes, rounded up to whole chunks of the
  // authenticated config: unlocks first (WrongPassword, ExpensiveKdf), then the stream grows by
  // holes, then the config, rewrapped under password so volume_size stays authenticated, goes to
  // the slot not in use (a config with key slots: its digest made again, no slot rewrapped). Throws
  // UserError when new_size is smaller. Returns the size before, as the authenticated copy said.
  std::uint64_t grow(std::uint64_t new_size, std::string_view secret, KdfPolicy policy = KdfPolicy::RefuseAboveInit,
                     KeySlotKind kind = KeySlotKind::Password);

  // Wraps the same master key under new_password (volume passwd): unlocks with password first
  // (WrongPassword, ExpensiveKdf), then writes the rewrapped config to both slots, the one not in
  // use first, each fsynced. Both, because a slot left under the old password would still open
  // the volume with it (unlock falls back to the other copy). Needs a writable container.
  // With key slots, the slot that opened is the one changed (new_kind: what it then holds).
  void change_password(std::string_view password, std::string_view new_password,
                       KdfPolicy policy = KdfPolicy::RefuseAboveInit, KeySlotKind kind = KeySlotKind::Password,
                       KeySlotKind new_kind = KeySlotKind::Password);

  // Writes next (the unlocked config with a key slot added or removed, or upgraded to key slots)
  // to both header copies, the one not in use first, each fsynced: a copy left as it was would
  // keep a removed slot opening the volume. Needs unlock() and a writable container. UserError
  // when next does not fit a copy.
  // rekeying: both copies marked as in the middle of a re-key (kVolumeRekeyingMagic).
  void replace_config(const VaultConfig& next, bool rekeying = false);

 private:
  void write_slot(const VaultConfig& config, bool rekeying = false);

  std::string path_;
  int fd_ = -1;
  VolumeHeader header_;
  VaultConfig config_;
  std::uint64_t generation_ = 0;
  int slot_ = 0;            // the slot config_ came from
  int opened_slot_ = -1;    // the key slot that unlocked config_
  bool unlocked_ = false;   // config_ is authenticated
  bool clean_ = false;      // unlocked from the newest copy, and the other slot is whole
};

}  // namespace gcfs
