// The record of a volume re-key in progress, kept inside the container itself (the reserved part
// of its config block, docs/FORMAT.md "Volume re-key"), so that a container moved or copied in the
// middle of a re-key still carries what it needs to finish: the new master key (wrapped under a
// key derived from the old one), the config the re-key ends with (every kept key slot already
// wrapping the new master key), and how far the in-place pass got.
//
// Authenticate, then act: the record is MACed under a key derived from the new master key, which
// only a holder of the old master key (the new key's wrap) or of the new one (a header already
// switched) can derive. A record that authenticates under neither is damage; nothing acts on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "crypto/secret.h"
#include "crypto/vault_config.h"
#include "fs/volume_rekey_pass.h"

namespace gcfs {

constexpr char kVolumeRekeyMagic[8] = {'G', 'C', 'F', 'S', 'V', 'R', 'R', '1'};
constexpr std::uint64_t kVolumeRekeyRecordOffset = 8192;   // after the two header copies
constexpr std::size_t kVolumeRekeyBlockBytes = 24 * 1024;  // two copies: 8 KiB to 56 KiB

struct VolumeRekeyRecord {
  VaultConfig next;                      // the header the re-key ends with
  std::uint64_t segment_chunks = 0;      // the hot zone's size, fixed for the whole re-key
  StreamRekeyProgress progress;
  std::vector<std::uint8_t> new_key_wrap;  // the new master key sealed under the old one's wrap key
};

// What the container's record blocks hold, before any key.
struct VolumeRekeyCopies {
  std::vector<std::pair<std::uint64_t, std::string>> bodies;  // (generation, body), newest first
  std::uint64_t newest_generation = 0;
  int newest_block = -1;   // which block holds the newest whole copy (-1: none)
  bool any_magic = false;  // a re-key was begun (whole copies or not)
  std::string damage;      // torn or damaged blocks, for the log
};

// Reads both record blocks of the container fd. Never throws for what the blocks hold.
VolumeRekeyCopies read_volume_rekey_copies(int fd, const std::string& label);

// A record opened with the key that unlocked the container's header.
struct OpenedVolumeRekey {
  VolumeRekeyRecord record;
  SecretBytes old_master;  // empty when the header already holds the new key (the pass is done)
  SecretBytes new_master;
};

// Opens the newest copy that authenticates under `unlocked` (the old master key, or the new one
// once the header has been switched). Throws CorruptData when none does.
OpenedVolumeRekey open_volume_rekey(const VolumeRekeyCopies& copies, const SecretBytes& unlocked,
                                    const std::string& label);

// A new record: the new master key wrapped under old_master.
VolumeRekeyRecord make_volume_rekey(const SecretBytes& old_master, const SecretBytes& new_master, VaultConfig next,
                                    std::uint64_t segment_chunks);

// Writes record (MACed under new_master) to the block not holding the newest copy, with the next
// generation, and syncs it: the newest whole copy survives a cut at any point. Updates *copies'
// newest fields. Throws UserError on a write or sync failure.
void write_volume_rekey(int fd, const std::string& label, const VolumeRekeyRecord& record,
                        const SecretBytes& new_master, VolumeRekeyCopies* copies);

// Wipes both blocks and syncs: the re-key is over.
void clear_volume_rekey(int fd, const std::string& label);

}  // namespace gcfs
