// A vault's content format: everything about how a regular file's plaintext lies in its backing
// file that differs from one format version to the next (docs/FORMAT.md, "File contents" and
// "File contents, version 2"). One implementation per version (format_v1.cc, format_v2.cc); the
// code that does not depend on the version (range locks, the read-modify-write of a partial
// chunk, holes, truncation's plan, the journal's rules, fsck's walk) lives elsewhere and asks the
// format object. The object is picked once, from the vault's version, when the ChunkLayout is
// made (chunk_layout.h), and every file of the vault uses it.
//
// What a version decides:
//   - the byte layout: where chunk k's nonce, ciphertext and tag lie, and the header;
//   - how the size on disk maps to the plaintext size (and what a torn write leaves);
//   - how a run of chunks is read and authenticated, and how it is sealed and written, with what
//     the crash journal must save before an in-place rewrite and how a failed write is undone;
//   - a chunk's *form* (nonce | ciphertext | tag, what the journal and fsck handle) and how it
//     is gathered from and scattered to disk;
//   - what the master-key probe reads of a file's first chunk, and what fsck reports of a size.
// Everything is const and stateless: one object per version serves every file and thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "crypto/key_ring.h"
#include "fs/chunk_layout.h"

namespace gcfs {

class ContentFile;

// The on-disk bytes of chunks as a read found them, still in the reading thread's scratch: a
// rewrite of exactly those chunks journals them as their pre-image instead of reading them a
// second time, and skips reserving space that they hold already.
struct CipherSeen {
  ChunkRange range{1, 0};  // none
  const std::uint8_t* data = nullptr;
  std::size_t len = 0;
  bool hole = false;  // some chunk of it read as a hole (all zeros: no blocks, or punched)
  // Format 2: data holds the chunks' ciphertext (chunk i at i * C, len bytes in all), meta
  // their entries (nonce | tag, 28 bytes each). Null where data holds the chunks' forms.
  const std::uint8_t* meta = nullptr;
};

// A range of the backing file, [begin, end), base offset included.
struct DiskRange {
  std::uint64_t begin = 0, end = 0;
};

// What the master-key probe learns from one file (master_key_probe.h).
struct FirstChunkProbe {
  bool mine = false;    // the file is of this format (its header says so, or no newer one claims it)
  bool usable = false;  // its first chunk holds data to try (not empty, a header alone or a hole)
  bool pinned = false;  // only one chunk size opens it, and the file holds more than one chunk under it
  std::vector<std::uint32_t> sizes;  // the chunk sizes under which its first chunk opens
};

// A chunk as journal recovery finds it in a file of a given ciphertext size.
enum class StoredChunk {
  Absent,  // not in the file at that size (past its end)
  Torn,    // should be there but cannot be read whole: a torn write
  Form,    // read; its form is in the buffer, to be authenticated
};

class ContentFormat {
 public:
  virtual ~ContentFormat() = default;

  // The version in the config and in every file header.
  virtual int version() const = 0;
  // Whether chunk ciphertext lies at 4 KiB-aligned offsets, so that O_DIRECT can carry it.
  virtual bool aligned() const = 0;
  // Throws std::invalid_argument for a chunk size or base offset this format cannot lay out.
  virtual void check_geometry(std::uint64_t chunk_size, std::uint64_t base_offset) const = 0;

  // ---- Geometry: ChunkLayout's answers (chunk_layout.h says what each one means).
  virtual std::uint64_t nonce_offset(const ChunkLayout& l, std::uint64_t chunk) const = 0;
  virtual std::uint64_t data_offset(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t plain_size) const = 0;
  virtual std::uint64_t tag_offset(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t plain_size) const = 0;
  virtual bool is_inline(std::uint64_t plain_size) const = 0;
  virtual std::uint64_t cipher_size(const ChunkLayout& l, std::uint64_t plain_size) const = 0;
  virtual std::optional<std::uint64_t> readable_plain_size(const ChunkLayout& l, std::uint64_t cipher_size,
                                                           std::uint64_t* fragment) const = 0;
  // What fallocate reserves for chunks r: every byte a write of them may take.
  virtual DiskRange reserve_range(const ChunkLayout& l, ChunkRange r) const = 0;
  // The bytes whose zeroing makes whole chunk k of a file of plain_size bytes a hole (a punch).
  virtual DiskRange hole_range(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t plain_size) const = 0;
  // The scratch a read of `chunks` chunks takes for their ciphertext and what is read with it.
  virtual std::uint64_t read_scratch_bytes(const ChunkLayout& l, std::uint64_t chunks) const = 0;

  // ---- Chunk forms (chunk_io.h): read and written where a file of plain_size bytes keeps them.
  virtual ssize_t read_forms(int fd, const ChunkLayout& l, std::uint64_t first, std::uint64_t last,
                             std::uint64_t plain_size, std::uint8_t* out) const = 0;
  virtual int write_forms(int fd, const ChunkLayout& l, std::uint64_t first, std::uint64_t plain_size,
                          const std::uint8_t* in, std::size_t len) const = 0;

  // ---- A content file's chunks (content_file.h), called with the file's locks held.
  // Opens chunks r of the current size into out (chunk i at i * C); *seen (optional) says where
  // their ciphertext lies until the thread's next open. out_room: the bytes out has (0: unknown).
  virtual int open_chunks(ContentFile& f, ChunkRange r, std::uint8_t* out, CipherSeen* seen,
                          std::size_t out_room) const = 0;
  // Seals chunk r.first + i from plains[i] (lengths from new_size) and writes the run, the
  // pre-image of durable chunks journaled first (ContentFile::protect_locked); a failed write
  // leaves the file as it was. seen: what the caller just read of r under the same locks.
  virtual int seal_and_write(ContentFile& f, ChunkRange r, const std::uint8_t* const* plains,
                             std::uint64_t new_size, const CipherSeen* seen) const = 0;
  // The forms of chunks run of the current size, for the journal: taken from seen when it holds
  // exactly them, else read. *bytes stays valid until the thread's next call.
  virtual int pre_image(ContentFile& f, ChunkRange run, const CipherSeen* seen, const std::uint8_t** bytes) const = 0;
  // Before chunk k of a file of plain_size bytes reads as a hole (punched, or grown into by a
  // truncation: is_new), whatever the format's hole rule needs besides zero data.
  virtual int prepare_hole(ContentFile& f, std::uint64_t chunk, std::uint64_t plain_size, bool is_new) const = 0;

  // ---- Crash journal recovery (journal_recovery.h).
  // Chunk k as the mount would read it from a file of S bytes (base offset included); a Form is
  // left in *form.
  virtual StoredChunk stored_chunk(int fd, const ChunkLayout& l, std::uint64_t S, std::uint64_t k,
                                   std::vector<std::uint8_t>* form) const = 0;
  // The plaintext size by which a record's pre-images are put back (with write_forms), from the
  // size the file had before the record's write: nullopt for a record that no write can have
  // made (skip it).
  virtual std::optional<std::uint64_t> restore_size(const ChunkLayout& l, std::uint64_t old_cipher_size) const = 0;
  // Whether a pre-image of len bytes is chunk k's form at that size (one of another length is
  // not put back), and where it ends on disk once put back.
  virtual bool form_fits(const ChunkLayout& l, std::uint64_t k, std::uint64_t size, std::size_t len) const = 0;
  virtual std::uint64_t form_end(const ChunkLayout& l, std::uint64_t k, std::uint64_t size, std::size_t len) const = 0;

  // ---- The master-key probe, which knows no chunk size yet (master_key_probe.h).
  virtual FirstChunkProbe probe_first_chunk(int fd, std::uint64_t size, const KeyRing& keys) const = 0;

  // ---- fsck (fs/fsck/).
  // The first chunk at or after `first` that may hold data (SEEK_DATA); nchunks when only holes
  // follow.
  virtual std::uint64_t next_data_chunk(const ChunkLayout& l, int fd, std::uint64_t first,
                                        std::uint64_t nchunks) const = 0;
  // What a file that ends `tail` bytes into a fragment (readable_plain_size) ends in, in words.
  virtual std::string describe_fragment(std::uint64_t tail) const = 0;
  // Why a size that readable_plain_size refuses (past the header) happens, in words; empty when
  // this format has no such size.
  virtual std::string why_size_impossible() const = 0;
};

// The format of a version (1 or 2); throws std::invalid_argument for any other.
const ContentFormat& content_format(int version);
// Every version, newest first (the master-key probe asks each in turn).
const std::vector<const ContentFormat*>& content_formats();

// The implementations (format_v1.cc, format_v2.cc); a new version adds one here and in
// content_format.cc's table.
const ContentFormat& content_format_v1();
const ContentFormat& content_format_v2();

}  // namespace gcfs
