// What a vault's own files say about a master key given without a password (mount --masterkey,
// passwd --masterkey), and about the one parameter a lost config takes with it that the files
// must give back: the chunk size. (Everything else a config holds is either fixed for format
// version 1, the features, or belongs to the password, the scrypt salt and cost; every key
// is derived from the master key alone, crypto/key_ring.h.)
//
// Two checks, both authenticated, so a wrong key is told from a right one and never mounted:
//   - names in CIPHERDIR's root decrypt (AES-SIV under the names key and the root's IV);
//   - the first chunk of content files opens (AES-GCM under the file's key). A chunk size C gives
//     the first chunk's length (C, or the whole rest of a file shorter than one chunk); only the
//     right C, or any C at least as long as a one-chunk file, opens it. So the sizes that every
//     file sampled accepts are the ones the vault may have been made with, and a file of more than
//     one chunk pins it.
// Nothing is written; nothing is opened but directories and regular files (fs/safe_open.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crypto/key_ring.h"
#include "fs/dir_iv_source.h"

namespace gcfs {

struct MasterKeyProbe {
  std::size_t names_ok = 0, names_bad = 0;  // entries of the root
  std::size_t files_ok = 0, files_bad = 0;  // content files whose first chunk opens with no size / some size
  // Chunk sizes (4 KiB to 1 MiB) accepted by the most files, smallest first; all of them when no
  // file was sampled.
  std::vector<std::uint32_t> chunk_sizes;
  // Whether chunk_sizes is one size pinned by a file of more than one chunk.
  bool chunk_size_pinned = false;
  // Content files sampled whose header says format 1 or 2 (docs/FORMAT.md): a vault's files all
  // have its format, which a lost config took with it too.
  std::size_t format1_files = 0, format2_files = 0;
  // The root's names were read with the constant IV (init --deterministic-names): told by the
  // caller, or, with nothing told, because the root has no gpucryptfs.diriv.
  bool deterministic_names = false;

  // The key opened something and nothing contradicts it.
  bool key_fits() const { return (names_ok || files_ok) && !(names_bad && !names_ok) && !(files_bad && !files_ok); }
  // Nothing in the vault to check a key against (an empty vault).
  bool nothing_to_check() const { return !names_ok && !names_bad && !files_ok && !files_bad; }
};

// Samples CIPHERDIR (its root's names; up to max_files content files, breadth first, stopping
// early once a file pins the chunk size). ivs: the vault's IV source when its config is known;
// null when not (a lost config): the root's gpucryptfs.diriv then, or the constant IV when the
// root has none. Throws UserError when CIPHERDIR or its root IV cannot be read.
MasterKeyProbe probe_master_key(const std::string& cipherdir, const KeyRing& keys, std::size_t max_files = 32,
                                const DirIvSource* ivs = nullptr);

}  // namespace gcfs
