// Format 2's reads and writes of a content file's chunks (format_v2.h): a group at a time, its
// entries in its metadata block and its ciphertext in aligned data blocks, which go through
// O_DIRECT where the vault uses it (direct_io.cc).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fs/chunk_auth.h"
#include "fs/chunk_io.h"
#include "fs/content/content_file.h"
#include "fs/content/format_v2.h"
#include "fs/content/scratch.h"
#include "fs/log.h"
#include "fs/plain_io.h"

namespace gcfs {
namespace {

// A write of several parts of this size goes to the engine part by part
// (ChunkEngine::seal_in_parts): the first parts are written to the backing file while the engine
// still seals the later ones. About 30 us of one core's cipher work, what a helper thread's wake-up
// is worth (the cpu engine's measure, cpu_engine.h); a 1 MiB request makes 8 parts.
constexpr std::uint64_t kWritePartBytes = 128u << 10;

}  // namespace

int ContentFormatV2::read_run(ContentFile& f, ChunkRange r, std::uint8_t* data, std::size_t room, bool room_in_front,
                              std::uint8_t* meta, std::uint8_t* header, bool* got_header) const {
  const ChunkLayout& layout = f.layout_;
  const std::uint64_t C = layout.chunk_size();
  const std::uint64_t base = layout.base_offset();
  const std::uint64_t size = f.size_;
  *got_header = false;
  const auto short_file = [&] { return f.corrupt("file is shorter than its size says (truncated underneath the mount?)"); };
  const auto take_header = [&](const std::uint8_t* from_base) {  // the bytes read from the header on
    std::memcpy(header, from_base, kFileHeaderBytes);
    *got_header = true;
  };
  if (is_inline(size)) {
    // One chunk, its entry and its ciphertext in the header block: one read (from the header
    // on, when it is wanted too).
    std::array<std::uint8_t, kV2BlockBytes> block;
    const std::uint64_t from = header ? base : nonce_offset(layout, 0), to = data_offset(layout, 0, size) + size;
    const ssize_t n = pread_full(f.fd(), block.data(), to - from, from);
    if (n < 0) return static_cast<int>(n);
    if (static_cast<std::uint64_t>(n) != to - from) return short_file();
    std::memcpy(meta, block.data() + (nonce_offset(layout, 0) - from), kChunkOverhead);
    std::memcpy(data, block.data() + (to - from - size), size);
    if (header) take_header(block.data());
    return 0;
  }
  for (std::uint64_t a = r.first; a <= r.last;) {
    // A group at a time: its entries, then its chunks' ciphertext.
    const std::uint64_t g = layout.group_of(a);
    const std::uint64_t b = std::min(r.last, (g + 1) * kV2ChunksPerGroup - 1);
    const std::uint64_t n = b - a + 1;
    const std::uint64_t block_at = layout.meta_block_offset(g), entries_at = nonce_offset(layout, a);
    const std::uint64_t len = (n - 1) * C + layout.chunk_plain_len(b, size);
    const std::size_t at = (a - r.first) * C;
    const std::uint64_t data_at = data_offset(layout, a, size);
    const bool want_header = header && g == 0;
    std::uint8_t* const entries = meta + (a - r.first) * kChunkOverhead;
    if (room_in_front && a == r.first && data_at == block_at + kV2BlockBytes &&
        f.direct_fd_for_read(data + at, len, room - at, data_at) < 0) {
      // The run starts at its group's first chunk, so its data follows the metadata block
      // directly, and it goes through the page cache anyway: block and data in one read, the
      // block into the room in front of data (a small file's whole read, header included).
      std::uint8_t* const block = data - kV2BlockBytes;
      const ssize_t got = pread_full(f.fd(), block, kV2BlockBytes + len, block_at);
      if (got < 0) return static_cast<int>(got);
      if (static_cast<std::uint64_t>(got) != kV2BlockBytes + len) return short_file();
      std::memcpy(entries, block + (entries_at - block_at), n * kChunkOverhead);
      if (want_header) take_header(block);
    } else {
      // The entries (from the header on, when it is wanted: both lie in group 0's block).
      std::array<std::uint8_t, kV2BlockBytes> block;
      const std::uint64_t from = want_header ? block_at : entries_at, to = entries_at + n * kChunkOverhead;
      ssize_t got = pread_full(f.fd(), block.data(), to - from, from);
      if (got < 0) return static_cast<int>(got);
      if (static_cast<std::uint64_t>(got) != to - from) return short_file();
      std::memcpy(entries, block.data() + (entries_at - from), n * kChunkOverhead);
      if (want_header) take_header(block.data());
      got = f.pread_data(data + at, len, room - at, data_at);
      if (got < 0) return static_cast<int>(got);
      if (static_cast<std::uint64_t>(got) != len) return short_file();
    }
    a = b + 1;
  }
  return 0;
}

int ContentFormatV2::open_chunks(ContentFile& f, ChunkRange r, std::uint8_t* out, CipherSeen* seen,
                                 std::size_t out_room) const {
  const ChunkLayout& layout = f.layout_;
  const std::uint64_t C = layout.chunk_size();
  if (r.last >= layout.chunk_count(f.size_)) return f.corrupt("internal: read past the end of the file");
  // The ciphertext of chunk i lies at i * C, where its plaintext goes: with nobody to keep the
  // ciphertext for (seen), it is read into out and opened in place, one buffer of the request's
  // size instead of two passing through the cache (and a chunk that fails is zeroed all the same).
  // Through the scratch buffer instead, the data sits a block's distance from its start: a
  // metadata block read in one call with the data after it lands in front (read_run), and the
  // start is page-aligned, so the data is too, as O_DIRECT wants it. Nothing is ever written in
  // front of out: in place, block and data are read apart.
  const bool in_place = !seen && out_room >= r.count() * C;
  std::uint8_t* ct = out;
  std::size_t ct_room = out_room;
  if (!in_place) {
    auto& buf = scratch(f.engine_, kCipherReadScratch, kV2BlockBytes + r.count() * C);
    ct = buf.data() + kV2BlockBytes;
    ct_room = buf.size() - kV2BlockBytes;
  }
  thread_local std::vector<std::uint8_t> entries;  // valid, like ct, until this thread's next open
  entries.resize(r.count() * kChunkOverhead);
  std::array<std::uint8_t, kFileHeaderBytes> header{};
  bool got_header = false;
  if (int rc = read_run(f, r, ct, ct_room, !in_place, entries.data(), f.header_known() ? nullptr : header.data(),
                        &got_header);
      rc < 0)
    return rc;
  const std::uint64_t data_len = (r.count() - 1) * C + layout.chunk_plain_len(r.last, f.size_);
  if (seen) *seen = CipherSeen{r, ct, data_len, false, entries.data()};

  int hr = f.ensure_header_locked(false, got_header ? header.data() : nullptr);
  if (hr < 0) return hr;

  // Per thread, reused by every read (none of them calls here again while it runs); reserved
  // up front so that add_open_op's AAD pointers stay put.
  thread_local std::vector<ChunkOp> ops;
  thread_local std::vector<std::array<std::uint8_t, kChunkAadBytes>> aads;
  ops.clear();
  aads.clear();
  ops.reserve(r.count());
  aads.reserve(r.count());
  for (std::uint64_t k = r.first; k <= r.last; ++k) {
    const std::uint64_t plen = layout.chunk_plain_len(k, f.size_);
    std::uint8_t* dst = out + (k - r.first) * C;
    const std::uint8_t* src = ct + (k - r.first) * C;
    const std::uint8_t* entry = entries.data() + (k - r.first) * kChunkOverhead;
    // A hole: ciphertext all zeros (never written, punched, or grown into by a truncation),
    // whatever the entry holds (entries of chunks cut off or punched stay behind), unless the
    // chunk is shorter than kV2HoleMinBytes: then its entry must be zero too.
    if (v2_is_hole(all_zero(src, plen), plen, all_zero(entry, kChunkOverhead))) {
      if (seen) seen->hole = true;
      std::memset(dst, 0, plen);
      continue;
    }
    // Format 2 keeps the nonce and tag in the group's entry, the ciphertext in the data block.
    f.add_open_op(ops, aads, k, entry, src, dst, plen, entry + kChunkNonceOnDisk);
  }
  if (in_place && !ops.empty()) {
    // Where a chunk fails in place, the read is done again the other way before anything is
    // reported: an engine that lost its GPU part-way through may have written into the very
    // bytes its fallback then opens (here they are its input too). A damaged chunk fails there
    // as well, and is reported and zeroed as always.
    f.engine_.open(ops);
    if (std::all_of(ops.begin(), ops.end(), [](const ChunkOp& op) { return op.ok; })) return 0;
    return open_chunks(f, r, out, nullptr, 0);
  }
  return f.open_and_report(ops, r.first, out);
}

int ContentFormatV2::reserve(ContentFile& f, const std::vector<Part>& groups, std::uint64_t new_size,
                             bool entries_on_disk) const {
  const ChunkLayout& layout = f.layout_;
  const std::uint64_t C = layout.chunk_size();
  for (const Part& p : groups) {
    const std::uint64_t eo = nonce_offset(layout, p.a), el = (p.b - p.a + 1) * kChunkOverhead;
    const std::uint64_t d0 = data_offset(layout, p.a, new_size);
    const std::uint64_t dl = (p.b - p.a) * C + layout.chunk_plain_len(p.b, new_size);
    if (((!entries_on_disk && ::fallocate(f.fd(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(eo), static_cast<off_t>(el)) != 0) ||
         ::fallocate(f.fd(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(d0), static_cast<off_t>(dl)) != 0) &&
        (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)) {
      const int err = errno;
      log::warning(f.label_.str() + (err == EFBIG ? ": write refused: file too large" : ": write refused: disk full"));
      return -err;
    }
  }
  return 0;
}

ssize_t ContentFormatV2::write_inline(ContentFile& f, const std::uint8_t* entry, const std::uint8_t* ct,
                                      std::uint64_t new_size,
                                      const std::optional<std::array<std::uint8_t, kFileHeaderBytes>>& new_header) const {
  const ChunkLayout& layout = f.layout_;
  // One write: entry, the gap before the inline offset (zeros), ciphertext; a new file's header
  // too, from the block's start.
  std::array<std::uint8_t, kV2BlockBytes> block{};
  const std::uint64_t from = new_header ? layout.base_offset() : nonce_offset(layout, 0);
  const std::uint64_t data_at = data_offset(layout, 0, new_size) - from;
  if (new_header) std::memcpy(block.data(), new_header->data(), kFileHeaderBytes);
  std::memcpy(block.data() + (nonce_offset(layout, 0) - from), entry, kChunkOverhead);
  std::memcpy(block.data() + data_at, ct, new_size);
  return pwrite_full(f.fd(), block.data(), data_at + new_size, from);
}

int ContentFormatV2::seal_and_write(ContentFile& f, ChunkRange r, const std::uint8_t* const* plains,
                                    std::uint64_t new_size, const CipherSeen* seen) const {
  const ChunkLayout& layout = f.layout_;
  const std::uint64_t C = layout.chunk_size();
  // A new file's header goes out with chunk 0's entry, which lies in the same block: one write.
  std::optional<std::array<std::uint8_t, kFileHeaderBytes>> new_header;
  int hr = f.ensure_header_locked(true, nullptr, r.first == 0 ? &new_header : nullptr);
  if (hr < 0) return hr;

  const std::uint64_t n = r.count();
  auto& ct = scratch(f.engine_, kCipherSealedScratch, n * C);
  // Per thread, reused by every request (none of them calls here again while it runs).
  thread_local std::vector<std::uint8_t> entries;
  entries.resize(n * kChunkOverhead);
  // Each chunk's ciphertext where an aligned write takes it from. Sealed below, once the journal
  // and the reservation are done: the engine hands the chunks back in parts, and each part is
  // written while later ones are still being sealed.
  auto& ops = f.chunk_ops_locked(r, plains, new_size, ct.data(), C);

  const std::uint64_t old_cipher = layout.base_offset() + layout.cipher_size(f.size_);
  const std::uint64_t last_len = layout.chunk_plain_len(r.last, new_size);
  const std::uint64_t write_end = data_offset(layout, r.last, new_size) + last_len;
  const bool extends = write_end > old_cipher;
  // Nothing that exists is touched: every chunk written lies past the old last chunk. (Chunk 0
  // of an inline file moving to its aligned place is not such a write: its entry is rewritten.)
  const bool pure_append = r.first >= layout.chunk_count(f.size_);
  ChunkJournal::Pending pending;
  const std::uint8_t* pre_image = nullptr;
  std::size_t pre_len = 0;
  std::uint64_t pre_first = 0;
  if (int prc = f.protect_locked(r, std::max(old_cipher, write_end), seen, &pending, &pre_image, &pre_len, &pre_first);
      prc < 0)
    return prc;
  const bool inside_old = write_end <= old_cipher && !(is_inline(f.size_) != is_inline(new_size));
  const bool seen_whole = seen && !seen->hole && seen->range.first == r.first && seen->range.last == r.last;
  const bool journaled_whole = pre_image && pre_first == r.first &&
                               pre_len == chunk_forms_bytes(layout, r.first, r.last, new_size) &&
                               !any_chunk_is_hole(pre_image, pre_len, C + kChunkOverhead);
  thread_local std::vector<Part> groups;  // per thread: no allocation per write
  groups.clear();
  for (std::uint64_t a = r.first; a <= r.last;) {
    const std::uint64_t b = std::min(r.last, (layout.group_of(a) + 1) * kV2ChunksPerGroup - 1);
    groups.push_back({a, b});
    a = b + 1;
  }
  if (!pure_append && !(inside_old && (seen_whole || journaled_whole))) {
    // Reserve first, as format 1 does (see there): a full disk fails here, before anything changed.
    // Chunks just read whole, none a hole, had their entries written when they were sealed: those
    // entries' blocks hold their space already, and only the data needs reserving (a write that
    // grows a file's partial last chunk: one fallocate instead of two).
    if (int rc = reserve(f, groups, new_size, /*entries_on_disk=*/seen_whole); rc < 0) return rc;
  }
  // Part of the write may have landed when it fails: put back the chunks it protected, at their
  // old places, and cut off what it appended.
  auto undo = [&] {
    if (pre_image) (void)write_forms(f.fd(), layout, pre_first, f.size_, pre_image, pre_len);
    if (new_header) {  // as in format 1: back to what the file was
      f.forget_header_locked();
      (void)::ftruncate(f.fd(), static_cast<off_t>(old_cipher));
    } else if (extends) {
      (void)::ftruncate(f.fd(), static_cast<off_t>(std::max(old_cipher, layout.base_offset() + kFileHeaderBytes)));
    }
  };
  auto fill_entries = [&](std::uint64_t a, std::uint64_t b) {  // ops a..b (indices into r)
    for (std::uint64_t i = a; i <= b; ++i) {
      std::uint8_t* e = entries.data() + i * kChunkOverhead;
      std::copy(ops[i].nonce.begin(), ops[i].nonce.end(), e);
      std::copy(ops[i].tag.begin(), ops[i].tag.end(), e + kChunkNonceOnDisk);
    }
  };
  ssize_t w = 0;
  if (is_inline(new_size)) {
    f.engine_.seal(ops);
    fill_entries(0, 0);
    w = write_inline(f, entries.data(), ct.data(), new_size, new_header);
  } else {
    // Parts of about kWritePartBytes, none across a group's end: each is written as soon as it
    // is sealed, in order, its entries before its ciphertext. A growing write cut short leaves
    // the file ending where it did, inside a new metadata block (read as the whole chunks before
    // it), or after the chunks written so far; never with new chunks whose entries are missing.
    // A rewrite cut short fails authentication either way; the crash journal holds its pre-image.
    const std::uint64_t part_chunks = std::max<std::uint64_t>(1, kWritePartBytes / C);
    thread_local std::vector<std::size_t> ends;
    ends.clear();
    for (const Part& g : groups)
      for (std::uint64_t a = g.a; a <= g.b; a += part_chunks)
        ends.push_back(static_cast<std::size_t>(std::min(g.b, a + part_chunks - 1) - r.first + 1));
    // Writes parts [pa, pb): the entries of each group they touch, then the ciphertext.
    auto write_parts = [&](std::size_t pa, std::size_t pb) {
      const std::uint64_t first = r.first + (pa == 0 ? 0 : ends[pa - 1]), last = r.first + ends[pb - 1] - 1;
      fill_entries(first - r.first, last - r.first);
      for (int pass = 0; pass < 2 && w >= 0; ++pass) {
        for (std::uint64_t a = first; a <= last && w >= 0;) {
          const std::uint64_t b = std::min(last, (layout.group_of(a) + 1) * kV2ChunksPerGroup - 1);
          const std::uint8_t* e = entries.data() + (a - r.first) * kChunkOverhead;
          const std::size_t elen = (b - a + 1) * kChunkOverhead;
          if (pass == 0 && a == 0 && new_header) {
            // A new file's header, the zeros up to the entries, and the entries of chunk 0 on.
            std::array<std::uint8_t, kV2EntriesOffset> head{};
            std::memcpy(head.data(), new_header->data(), kFileHeaderBytes);
            w = pwrite2_full(f.fd(), head.data(), head.size(), e, elen, layout.base_offset());
          } else {
            const std::uint64_t data_len = (b - a) * C + layout.chunk_plain_len(b, new_size);
            w = pass == 0 ? pwrite_full(f.fd(), e, elen, nonce_offset(layout, a))
                          : f.pwrite_data(ct.data() + (a - r.first) * C, data_len, data_offset(layout, a, new_size));
          }
          a = b + 1;
        }
      }
      return w >= 0;
    };
    try {
      f.engine_.seal_in_parts(ops, ends, write_parts);
    } catch (...) {
      undo();
      throw;
    }
  }
  if (w < 0) {
    undo();
    if (w == -ENOSPC || w == -EDQUOT) log::warning(f.label_.str() + ": write failed: disk full");
    return static_cast<int>(w);
  }
  return 0;
}

int ContentFormatV2::pre_image(ContentFile& f, ChunkRange run, const CipherSeen* seen,
                               const std::uint8_t** bytes) const {
  const ChunkLayout& layout = f.layout_;
  const std::uint64_t C = layout.chunk_size();
  const std::uint64_t len = chunk_forms_bytes(layout, run.first, run.last, f.size_);
  // The journal holds chunk forms (nonce | ciphertext | tag): gathered from what the caller just
  // read when it read exactly these chunks, else from the file.
  thread_local std::vector<std::uint8_t> forms;
  forms.resize(len);
  if (seen && seen->meta && seen->range.first == run.first && seen->range.last == run.last) {
    std::uint64_t at = 0;
    for (std::uint64_t k = run.first; k <= run.last; ++k) {
      const std::uint64_t plen = layout.chunk_plain_len(k, f.size_);
      gather_v2_form(seen->data + (k - run.first) * C, seen->meta + (k - run.first) * kChunkOverhead, plen,
                     forms.data() + at);
      at += plen + kChunkOverhead;
    }
  } else {
    const ssize_t n = read_forms(f.fd(), layout, run.first, run.last, f.size_, forms.data());
    if (n < 0) return static_cast<int>(n);
    if (static_cast<std::uint64_t>(n) != len)
      return f.corrupt("file is shorter than its size says (truncated underneath the mount?)");
  }
  *bytes = forms.data();
  return 0;
}

int ContentFormatV2::prepare_hole(ContentFile& f, std::uint64_t chunk, std::uint64_t plain_size, bool is_new) const {
  // A new hole shorter than kV2HoleMinBytes reads as a hole only with a zero entry, and its entry
  // slot may hold what an earlier, longer file or a torn append left there.
  if (!is_new || f.layout_.chunk_plain_len(chunk, plain_size) >= kV2HoleMinBytes) return 0;
  // Beyond the end of the file the slot reads as zeros once the file is extended.
  struct stat st {};
  if (::fstat(f.fd(), &st) != 0) return -errno;
  if (nonce_offset(f.layout_, chunk) >= static_cast<std::uint64_t>(st.st_size)) return 0;
  const std::array<std::uint8_t, kChunkOverhead> zeros{};
  const ssize_t w = pwrite_full(f.fd(), zeros.data(), zeros.size(), nonce_offset(f.layout_, chunk));
  return w < 0 ? static_cast<int>(w) : 0;
}

}  // namespace gcfs
