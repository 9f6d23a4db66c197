// Content format version 2, sector-aligned (docs/FORMAT.md, "File contents, version 2"): chunk
// ciphertext at 4 KiB-aligned offsets, each group of 128 chunks led by a metadata block of their
// nonces and tags (entries), small files inline in the header block. Declared here for its two
// files: format_v2.cc (geometry, forms, recovery, probe, fsck) and format_v2_io.cc (a content
// file's reads and writes).
#pragma once

#include <array>
#include <optional>

#include "fs/content/content_format.h"
#include "fs/file_header.h"

namespace gcfs {

// Chunk k's form (nonce | ciphertext | tag) from its ciphertext (len bytes) and its entry, into
// form (len + 28 bytes). A hole by format 2's rule (v2_is_hole) gives a form of zeros.
void gather_v2_form(const std::uint8_t* data, const std::uint8_t* entry, std::uint64_t len, std::uint8_t* form);

class ContentFormatV2 final : public ContentFormat {
 public:
  int version() const override { return 2; }
  bool aligned() const override { return true; }
  void check_geometry(std::uint64_t chunk_size, std::uint64_t base_offset) const override;

  std::uint64_t nonce_offset(const ChunkLayout& l, std::uint64_t chunk) const override;
  std::uint64_t data_offset(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t plain_size) const override;
  std::uint64_t tag_offset(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t plain_size) const override;
  bool is_inline(std::uint64_t plain_size) const override { return plain_size > 0 && plain_size <= kV2InlineMax; }
  std::uint64_t cipher_size(const ChunkLayout& l, std::uint64_t plain_size) const override;
  std::optional<std::uint64_t> readable_plain_size(const ChunkLayout& l, std::uint64_t cipher_size,
                                                   std::uint64_t* fragment) const override;
  DiskRange reserve_range(const ChunkLayout& l, ChunkRange r) const override;
  DiskRange hole_range(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t plain_size) const override;
  std::uint64_t read_scratch_bytes(const ChunkLayout& l, std::uint64_t chunks) const override;

  ssize_t read_forms(int fd, const ChunkLayout& l, std::uint64_t first, std::uint64_t last, std::uint64_t plain_size,
                     std::uint8_t* out) const override;
  int write_forms(int fd, const ChunkLayout& l, std::uint64_t first, std::uint64_t plain_size, const std::uint8_t* in,
                  std::size_t len) const override;

  int open_chunks(ContentFile& f, ChunkRange r, std::uint8_t* out, CipherSeen* seen, std::size_t out_room) const override;
  int seal_and_write(ContentFile& f, ChunkRange r, const std::uint8_t* const* plains, std::uint64_t new_size,
                     const CipherSeen* seen) const override;
  int pre_image(ContentFile& f, ChunkRange run, const CipherSeen* seen, const std::uint8_t** bytes) const override;
  int prepare_hole(ContentFile& f, std::uint64_t chunk, std::uint64_t plain_size, bool is_new) const override;

  StoredChunk stored_chunk(int fd, const ChunkLayout& l, std::uint64_t S, std::uint64_t k,
                           std::vector<std::uint8_t>* form) const override;
  std::optional<std::uint64_t> restore_size(const ChunkLayout& l, std::uint64_t old_cipher_size) const override;
  bool form_fits(const ChunkLayout& l, std::uint64_t k, std::uint64_t size, std::size_t len) const override {
    return len == l.chunk_plain_len(k, size) + kChunkOverhead;
  }
  std::uint64_t form_end(const ChunkLayout& l, std::uint64_t k, std::uint64_t size, std::size_t len) const override {
    return l.data_offset(k, size) + len - kChunkOverhead;
  }

  FirstChunkProbe probe_first_chunk(int fd, std::uint64_t size, const KeyRing& keys) const override;

  std::uint64_t next_data_chunk(const ChunkLayout& l, int fd, std::uint64_t first, std::uint64_t nchunks) const override;
  std::string describe_fragment(std::uint64_t tail) const override {
    return " ends " + std::to_string(tail) + " bytes into a metadata block whose chunks never came";
  }
  std::string why_size_impossible() const override {
    return "the first chunk cut short as the file grew out of its header block";
  }

 private:
  // The groups a run of chunks touches, each as [a, b]: its entries are one run in its metadata
  // block, its ciphertext one run of aligned blocks.
  struct Part {
    std::uint64_t a, b;
  };
  // Reads chunks r of the current size, ciphertext to data (chunk i at i * C; room: the bytes
  // data has, for O_DIRECT's rounding) and entries to meta (28 bytes each).
  // room_in_front: data has kV2BlockBytes more in front of it, where a metadata block read in one
  // call with the data that follows it lands (false: a request's own reply buffer, in front of
  // which nothing may be written; block and data are then read apart). header (optional): where
  // the file header goes when the read of group 0's entries can bring it along; *got_header says
  // whether it did.
  int read_run(ContentFile& f, ChunkRange r, std::uint8_t* data, std::size_t room, bool room_in_front,
               std::uint8_t* meta, std::uint8_t* header, bool* got_header) const;
  // Reserves the space a write of chunks in `groups` takes (only the data when the entries are
  // on disk already). 0, or -errno (ENOSPC, EDQUOT, EFBIG) before anything changed.
  int reserve(ContentFile& f, const std::vector<Part>& groups, std::uint64_t new_size, bool entries_on_disk) const;
  // Writes a sealed inline file (new_size bytes): entry, zeros, ciphertext, in one call from
  // offset 64 (from 0, with a new file's header).
  ssize_t write_inline(ContentFile& f, const std::uint8_t* entry, const std::uint8_t* ct, std::uint64_t new_size,
                       const std::optional<std::array<std::uint8_t, kFileHeaderBytes>>& new_header) const;
};

}  // namespace gcfs
