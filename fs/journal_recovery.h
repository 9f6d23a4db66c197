// Putting back what the crash journal (chunk_journal.h) holds: after the daemon died during an
// in-place rewrite, the chunks that rewrite tore fail authentication, and the journal still holds
// a valid record with their pre-images.
//
// The rule that makes this safe: a chunk is restored only when its bytes on disk FAIL
// authentication and the pre-image AUTHENTICATES (with the file's key and the chunk's AAD), or
// is a hole in a record whose HMAC shows this vault wrote it. A stale record can therefore never
// overwrite good data, and a record planted by someone with write access to CIPHERDIR (in the
// previous release's format, whose SHA-256 anyone can compute) can only turn a failing chunk into
// an older authentic version of itself, which replaying old ciphertext does as well. The path
// hint is resolved beneath CIPHERDIR only (safe_open.h), and the file there must carry the
// record's file ID, so nothing outside CIPHERDIR is ever opened. The only other change recovery
// makes is cutting a file back to its size before a torn growing write, and never into a chunk
// it has just restored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"
#include "crypto/key_ring.h"
#include "fs/chunk_journal.h"
#include "fs/chunk_layout.h"

namespace gcfs {

struct RestorePlan {
  std::vector<std::uint64_t> chunks;  // restored (apply) or restorable (dry run), ascending
  bool truncated = false;             // the file was cut back to its size before the torn write
  int error = 0;                      // -errno of a failed pwrite/ftruncate/fsync, else 0
};

// For one open file whose header holds file ID id: the records concerning it (any order; the
// newest is used first for each chunk). With apply, writes the pre-images back, cuts the file
// back to its size before the torn write where that write had extended it, and fsyncs; fd must
// then be open read-write. Without apply, only says which chunks it would restore.
RestorePlan restore_from_records(int fd, const FileId& id, const std::vector<const JournalRecord*>& records,
                                 const ChunkLayout& layout, const KeyRing& keys, ChunkEngine& engine, bool apply);

// Mount-time recovery for a directory vault: every valid record of the journal file, found
// through its path hint beneath cipherdir_fd (cipherdir: its path, for messages); logs "restored chunk K of PATH from the crash journal" for each chunk
// put back, and a warning for each record whose file is gone or has another file ID. Does NOT
// invalidate the records (the caller does, once this returned). Returns the chunks restored.
std::size_t recover_from_journal(int cipherdir_fd, const std::string& cipherdir,
                                 const std::vector<JournalRecord>& records, const ChunkLayout& layout,
                                 const KeyRing& keys, ChunkEngine& engine);

}  // namespace gcfs
