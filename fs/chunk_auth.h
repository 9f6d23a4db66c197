// Authenticating sealed chunks where they lie on disk: the one loop that fsck of a directory vault
// and `volume fsck` both run over each batch of chunks they read, and the format's hole rule
// (a chunk whose on-disk bytes are all zero was never written, or was punched, and reads as zeros).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"
#include "fs/chunk_layout.h"
#include "fs/file_header.h"

namespace gcfs {

// Chunk numbers (sorted) for a message, consecutive ones as runs: "3", "3..7, 12"; past max_runs
// runs, ", ..." ends the list.
std::string describe_chunk_runs(const std::vector<std::uint64_t>& chunks, std::size_t max_runs);

// True when all n bytes at p are zero: a hole, by the format's rule, when they are a chunk's.
bool all_zero(const std::uint8_t* p, std::size_t n);
// Whether any chunk of a run of chunk forms (each disk_chunk bytes, the last maybe shorter) is all
// zeros, which is how a hole reads. Ciphertext is random: the scan of a written chunk stops at
// its first byte.
bool any_chunk_is_hole(const std::uint8_t* p, std::size_t len, std::uint64_t disk_chunk);

struct ChunkRunCheck {
  std::uint64_t holes = 0;   // chunks whose bytes are all zero: holes, counted and not opened
  std::uint64_t opened = 0;  // chunks handed to the engine, authentic or not
};

// Opens chunks [first, last] of a stream of plain_size plaintext bytes sealed for file `id` under
// key, from ct: their on-disk bytes back to back, as read from layout.disk_offset(first) (every
// chunk disk_chunk_size() apart, the last one possibly short). Appends the number of each chunk
// that fails authentication to *bad. The plaintext goes through *scratch, wiped before returning.
ChunkRunCheck check_chunk_run(ChunkEngine& engine, const ChunkLayout& layout, const ChunkKey& key, const FileId& id,
                              std::uint64_t first, std::uint64_t last, std::uint64_t plain_size,
                              const std::uint8_t* ct, std::vector<std::uint8_t>* scratch,
                              std::vector<std::uint64_t>* bad);

}  // namespace gcfs
