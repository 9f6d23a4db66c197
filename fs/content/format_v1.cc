// Content format version 1 (docs/FORMAT.md, "File contents"): the header, then every chunk as
// nonce | ciphertext | tag, back to back. A chunk's form is its bytes on disk, so reads, writes,
// the journal's pre-images and fsck all move one contiguous range per run of chunks.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <span>

#include "crypto/aes_gcm.h"
#include "crypto/secret.h"
#include "crypto/vault_config.h"
#include "fs/chunk_auth.h"
#include "fs/chunk_io.h"
#include "fs/content/content_file.h"
#include "fs/content/scratch.h"
#include "fs/log.h"
#include "fs/plain_io.h"

namespace gcfs {

class ContentFormatV1 final : public ContentFormat {
 public:
  int version() const override { return 1; }
  bool aligned() const override { return false; }
  void check_geometry(std::uint64_t, std::uint64_t) const override {}

  std::uint64_t nonce_offset(const ChunkLayout& l, std::uint64_t chunk) const override { return l.disk_offset(chunk); }
  std::uint64_t data_offset(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t) const override {
    return l.disk_offset(chunk) + kChunkNonceOnDisk;
  }
  std::uint64_t tag_offset(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t plain_size) const override {
    return data_offset(l, chunk, plain_size) + l.chunk_plain_len(chunk, plain_size);
  }
  bool is_inline(std::uint64_t) const override { return false; }
  std::uint64_t cipher_size(const ChunkLayout& l, std::uint64_t plain_size) const override {
    const std::uint64_t full = plain_size / l.chunk_size();
    const std::uint64_t rem = plain_size % l.chunk_size();
    return kFileHeaderBytes + full * l.disk_chunk_size() + (rem ? rem + kChunkOverhead : 0);
  }
  std::optional<std::uint64_t> readable_plain_size(const ChunkLayout& l, std::uint64_t cipher_size,
                                                   std::uint64_t* fragment) const override {
    const std::uint64_t body = cipher_size - kFileHeaderBytes;
    const std::uint64_t full = body / l.disk_chunk_size();
    const std::uint64_t rem = body % l.disk_chunk_size();
    if (rem > kChunkOverhead) return full * l.chunk_size() + (rem - kChunkOverhead);
    // rem == 0: whole chunks. 1..28: an incomplete chunk, no room for any plaintext.
    if (fragment) *fragment = rem;
    return full * l.chunk_size();
  }
  DiskRange reserve_range(const ChunkLayout& l, ChunkRange r) const override {
    // Whole chunks, the header too when the range starts at chunk 0.
    return {r.first == 0 ? l.base_offset() : l.disk_offset(r.first), l.disk_offset(r.last) + l.disk_chunk_size()};
  }
  DiskRange hole_range(const ChunkLayout& l, std::uint64_t chunk, std::uint64_t plain_size) const override {
    // The whole chunk, nonce and tag included: all-zero bytes on disk read back as a hole.
    const std::uint64_t b = l.disk_offset(chunk);
    return {b, b + l.chunk_plain_len(chunk, plain_size) + kChunkOverhead};
  }
  std::uint64_t read_scratch_bytes(const ChunkLayout& l, std::uint64_t chunks) const override {
    return chunks * l.disk_chunk_size() + kFileHeaderBytes;  // a header is read along with chunk 0
  }

  ssize_t read_forms(int fd, const ChunkLayout& l, std::uint64_t first, std::uint64_t last, std::uint64_t plain_size,
                     std::uint8_t* out) const override {
    return pread_full(fd, out, chunk_forms_bytes(l, first, last, plain_size), l.disk_offset(first));
  }
  int write_forms(int fd, const ChunkLayout& l, std::uint64_t first, std::uint64_t, const std::uint8_t* in,
                  std::size_t len) const override {
    const ssize_t w = pwrite_full(fd, in, len, l.disk_offset(first));
    return w < 0 ? static_cast<int>(w) : 0;
  }

  int open_chunks(ContentFile& f, ChunkRange r, std::uint8_t* out, CipherSeen* seen, std::size_t) const override;
  int seal_and_write(ContentFile& f, ChunkRange r, const std::uint8_t* const* plains, std::uint64_t new_size,
                     const CipherSeen* seen) const override;
  int pre_image(ContentFile& f, ChunkRange run, const CipherSeen* seen, const std::uint8_t** bytes) const override;
  int prepare_hole(ContentFile&, std::uint64_t, std::uint64_t, bool) const override { return 0; }

  StoredChunk stored_chunk(int fd, const ChunkLayout& l, std::uint64_t S, std::uint64_t k,
                           std::vector<std::uint8_t>* form) const override;
  // Chunks lie by their number alone: a pre-image goes back at its place whatever the old size.
  std::optional<std::uint64_t> restore_size(const ChunkLayout&, std::uint64_t) const override { return 0; }
  bool form_fits(const ChunkLayout&, std::uint64_t, std::uint64_t, std::size_t) const override { return true; }
  std::uint64_t form_end(const ChunkLayout& l, std::uint64_t k, std::uint64_t, std::size_t len) const override {
    return l.disk_offset(k) + len;
  }

  FirstChunkProbe probe_first_chunk(int fd, std::uint64_t size, const KeyRing& keys) const override;

  std::uint64_t next_data_chunk(const ChunkLayout& l, int fd, std::uint64_t first, std::uint64_t nchunks) const override {
    const off_t at = ::lseek(fd, static_cast<off_t>(l.disk_offset(first)), SEEK_DATA);
    if (at < 0) return errno == ENXIO ? nchunks : first;  // ENXIO: no data past this point; else no SEEK_DATA here
    const std::uint64_t data = static_cast<std::uint64_t>(at);
    if (data <= l.disk_offset(first)) return first;
    return std::min(nchunks, (data - l.disk_offset(0)) / l.disk_chunk_size());
  }
  std::string describe_fragment(std::uint64_t tail) const override {
    return " ends in an incomplete chunk of " + std::to_string(tail) + " bytes (at most its nonce and tag)";
  }
  std::string why_size_impossible() const override { return ""; }
};

const ContentFormat& content_format_v1() {
  static const ContentFormatV1 format;
  return format;
}

int ContentFormatV1::open_chunks(ContentFile& f, ChunkRange r, std::uint8_t* out, CipherSeen* seen,
                                 std::size_t) const {
  const ChunkLayout& layout = f.layout_;
  const std::uint64_t C = layout.chunk_size();
  const std::uint64_t D = layout.disk_chunk_size();
  const std::uint64_t disk_begin = layout.disk_offset(r.first);
  const std::uint64_t disk_end =
      std::min(layout.disk_offset(r.last + 1), layout.base_offset() + layout.cipher_size(f.size_));
  if (disk_end <= disk_begin) return f.corrupt("internal: read past the end of the file");
  const std::size_t disk_len = disk_end - disk_begin;
  // A header not known yet lies right before chunk 0: the read of chunk 0 brings it along (a
  // small file's first read is then one backing call).
  const bool with_header = r.first == 0 && !f.header_known();
  const std::uint64_t read_from = with_header ? layout.base_offset() : disk_begin;
  const std::size_t read_len = disk_end - read_from;
  auto& rd = scratch(f.engine_, kCipherReadScratch, read_len);
  ssize_t n = pread_full(f.fd(), rd.data(), read_len, read_from);
  if (n < 0) return static_cast<int>(n);
  if (static_cast<std::size_t>(n) != read_len)
    return f.corrupt("file is shorter than its size says (truncated underneath the mount?)");
  const std::uint8_t* ct = rd.data() + (disk_begin - read_from);
  if (seen) *seen = CipherSeen{r, ct, disk_len};

  int hr = f.ensure_header_locked(false, with_header ? rd.data() : nullptr);
  if (hr < 0) return hr;

  std::vector<ChunkOp> ops;
  std::vector<std::array<std::uint8_t, kChunkAadBytes>> aads;
  ops.reserve(r.count());
  aads.reserve(r.count());
  for (std::uint64_t k = r.first; k <= r.last; ++k) {
    const std::uint64_t plen = layout.chunk_plain_len(k, f.size_);
    std::uint8_t* dst = out + (k - r.first) * C;
    const std::uint8_t* src = ct + (k - r.first) * D;
    if (all_zero(src, plen + kChunkOverhead)) {  // a hole: never written, or punched
      if (seen) seen->hole = true;
      std::memset(dst, 0, plen);
      continue;
    }
    // Format 1 keeps each chunk as nonce | ciphertext | tag.
    f.add_open_op(ops, aads, k, src, src + kChunkNonceOnDisk, dst, plen, src + kChunkNonceOnDisk + plen);
  }
  return f.open_and_report(ops, r.first, out);
}

int ContentFormatV1::seal_and_write(ContentFile& f, ChunkRange r, const std::uint8_t* const* plains,
                                    std::uint64_t new_size, const CipherSeen* seen) const {
  const ChunkLayout& layout = f.layout_;
  const std::uint64_t D = layout.disk_chunk_size();
  // A new file's header goes out with chunk 0, which follows it on disk: one write.
  std::optional<std::array<std::uint8_t, kFileHeaderBytes>> new_header;
  int hr = f.ensure_header_locked(true, nullptr, r.first == 0 ? &new_header : nullptr);
  if (hr < 0) return hr;

  const std::uint64_t last_len = layout.chunk_plain_len(r.last, new_size);
  const std::size_t disk_len = (r.count() - 1) * D + last_len + kChunkOverhead;
  auto& ct = scratch(f.engine_, kCipherSealedScratch, disk_len);
  const auto& ops = f.seal_chunks_locked(r, plains, new_size, ct.data() + kChunkNonceOnDisk, D);
  for (std::uint64_t i = 0; i < r.count(); ++i) {
    std::uint8_t* base = ct.data() + i * D;
    std::copy(ops[i].nonce.begin(), ops[i].nonce.end(), base);
    std::copy(ops[i].tag.begin(), ops[i].tag.end(), base + kChunkNonceOnDisk + ops[i].len);
  }

  const std::uint64_t disk_off = layout.disk_offset(r.first);
  const std::uint64_t old_cipher = layout.base_offset() + layout.cipher_size(f.size_);
  const bool extends = disk_off + disk_len > old_cipher;
  // Reserve the space first: on a full disk the write fails here, before any byte of the file
  // has changed. Rewrites inside the file need it as much as appends that rewrite the old last
  // chunk do, because a chunk that is a hole has no blocks yet, and a torn chunk would turn
  // readable bytes into EIO. Over allocated blocks this is a cheap no-op. A pure append (nothing
  // before the old end is touched) skips it: should pwrite stop on a full disk, cutting the file
  // back restores it exactly, and the filesystem allocates the blocks at writeback in larger
  // extents than reserving them one request at a time does. Filesystems without fallocate
  // (some network ones) skip this step.
  const bool pure_append = disk_off >= old_cipher;
  // Chunks that may hold durable data get their pre-image journaled first; the record stays
  // valid until `pending` goes out of scope, after the pwrite below has returned. (Before the
  // reservation, which may then skip: a record for a write that fails on a full disk only holds
  // what the chunks still hold.)
  ChunkJournal::Pending pending;
  const std::uint8_t* pre_image = nullptr;
  std::size_t pre_len = 0;
  std::uint64_t pre_first = 0;
  if (int prc = f.protect_locked(r, std::max(old_cipher, disk_off + disk_len), seen, &pending, &pre_image, &pre_len,
                                 &pre_first);
      prc < 0)
    return prc;
  // A rewrite of chunks whose current bytes were just read (to open them, or as the journal's
  // pre-image), none of them a hole, ending inside the old ciphertext, goes over blocks the
  // filesystem already holds (a sealed chunk is written in one pwrite): nothing to reserve, so no
  // fallocate call (7% of a 4 KiB rewrite's CPU with 4 KiB chunks).
  const bool inside_old = disk_off + disk_len <= old_cipher;
  const bool seen_whole = seen && !seen->hole && seen->range.first == r.first && seen->range.last == r.last;
  const bool journaled_whole = pre_image && pre_first == r.first && pre_len == disk_len &&
                               !any_chunk_is_hole(pre_image, pre_len, layout.disk_chunk_size());
  if (!pure_append && !(inside_old && (seen_whole || journaled_whole)) &&
      ::fallocate(f.fd(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(disk_off), static_cast<off_t>(disk_len)) != 0 &&
      (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)) {
    // EFBIG: past the filesystem's largest file, where pwrite would stop part-way too.
    const int err = errno;
    log::warning(f.label_.str() + (err == EFBIG ? ": write refused: file too large" : ": write refused: disk full"));
    return -err;
  }
  ssize_t w = new_header ? pwrite2_full(f.fd(), new_header->data(), kFileHeaderBytes, ct.data(), disk_len,
                                        disk_off - kFileHeaderBytes)
                         : pwrite_full(f.fd(), ct.data(), disk_len, disk_off);
  if (w < 0) {
    // A rewrite that failed part-way (EIO, say) may have left a torn mix: put the old chunks back.
    if (pre_image) (void)pwrite_full(f.fd(), pre_image, pre_len, layout.disk_offset(pre_first));
    // Cut off whatever part of the new chunks landed, so the file keeps a valid size (with a
    // header that went with them, back to what the file was: no header, or one the next write
    // replaces, as the file holds nothing).
    if (new_header) {
      f.forget_header_locked();
      (void)::ftruncate(f.fd(), static_cast<off_t>(old_cipher));
    } else if (extends) {
      (void)::ftruncate(f.fd(), static_cast<off_t>(std::max(old_cipher, layout.base_offset() + kFileHeaderBytes)));
    }
    if (w == -ENOSPC || w == -EDQUOT) log::warning(f.label_.str() + ": write failed: disk full");
    return static_cast<int>(w);
  }
  return 0;
}

int ContentFormatV1::pre_image(ContentFile& f, ChunkRange run, const CipherSeen* seen,
                               const std::uint8_t** bytes) const {
  const std::uint64_t len = chunk_forms_bytes(f.layout_, run.first, run.last, f.size_);
  if (seen && seen->range.first == run.first && seen->range.last == run.last && seen->len == len) {
    // The caller read these very bytes under the locks it still holds (a rewrite of part of a
    // chunk opens it first): they are what is on disk now.
    *bytes = seen->data;
    return 0;
  }
  thread_local std::vector<std::uint8_t> buf;
  buf.resize(len);
  ssize_t n = pread_full(f.fd(), buf.data(), buf.size(), f.layout_.disk_offset(run.first));  // normally a page-cache hit
  if (n < 0) return static_cast<int>(n);
  if (static_cast<std::size_t>(n) != buf.size())
    return f.corrupt("file is shorter than its size says (truncated underneath the mount?)");
  *bytes = buf.data();
  return 0;
}

StoredChunk ContentFormatV1::stored_chunk(int fd, const ChunkLayout& layout, std::uint64_t S, std::uint64_t k,
                                          std::vector<std::uint8_t>* form) const {
  const std::uint64_t off = layout.disk_offset(k), D = layout.disk_chunk_size();
  if (S <= off) return StoredChunk::Absent;
  const auto plain = S >= layout.base_offset() ? layout.plain_size(S - layout.base_offset()) : std::nullopt;
  std::uint64_t len;
  if (plain) {
    len = layout.chunk_plain_len(k, *plain);
    if (len == 0) return StoredChunk::Absent;
  } else if (off + D <= S) {
    len = layout.chunk_size();
  } else {
    return StoredChunk::Torn;  // the torn tail of a file whose size is impossible
  }
  form->resize(len + kChunkOverhead);
  if (pread_full(fd, form->data(), form->size(), off) != static_cast<ssize_t>(form->size())) return StoredChunk::Torn;
  return StoredChunk::Form;
}

FirstChunkProbe ContentFormatV1::probe_first_chunk(int fd, std::uint64_t size, const KeyRing& keys) const {
  // The oldest format: asked last, it takes every file no newer format claimed.
  FirstChunkProbe p;
  p.mine = true;
  if (size <= kFileHeaderBytes + kChunkOverhead) return p;
  const std::uint64_t rest = size - kFileHeaderBytes;
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(std::min<std::uint64_t>(size, kFileHeaderBytes + kMaxChunkSize + kChunkOverhead)));
  std::size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got != buf.size()) return p;
  const auto header = FileHeader::decode(std::span(buf.data(), kFileHeaderBytes));
  if (!header) return p;
  const std::uint8_t* first = buf.data() + kFileHeaderBytes;
  if (std::all_of(first, first + kChunkOverhead, [](std::uint8_t b) { return b == 0; })) return p;  // a hole
  p.usable = true;
  const ChunkKey key = keys.content_key(header->id);
  const auto aad = chunk_aad(header->id, 0);
  std::vector<std::uint8_t> plain;
  for (std::uint32_t c = kMinChunkSize; c <= kMaxChunkSize; c *= 2) {
    const std::uint64_t record = std::min<std::uint64_t>(rest, c + kChunkOverhead);
    const std::size_t body = static_cast<std::size_t>(record - kChunkOverhead);
    plain.resize(body);
    if (gcm_open(key.bytes, std::span(first, kChunkNonceOnDisk), aad, std::span(first + kChunkNonceOnDisk, body),
                 std::span(first + kChunkNonceOnDisk + body, kChunkTagOnDisk), plain.data()))
      p.sizes.push_back(c);
  }
  secure_wipe(plain.data(), plain.size());
  p.pinned = p.sizes.size() == 1 && rest > p.sizes.front() + kChunkOverhead;
  return p;
}

}  // namespace gcfs
