#include "fs/content_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "crypto/random.h"
#include "fs/chunk_auth.h"
#include "fs/chunk_io.h"
#include "fs/log.h"
#include "fs/plain_io.h"

namespace gcfs {
namespace {

// A format 2 write of several parts of this size goes to the engine part by part
// (ChunkEngine::seal_in_parts): the first parts are written to the backing file while the engine
// still seals the later ones. About 30 us of one core's cipher work, what a helper thread's wake-up
// is worth (the cpu engine's measure, cpu_engine.h); a 1 MiB request makes 8 parts.
constexpr std::uint64_t kWritePartBytes = 128u << 10;

// Per-thread scratch buffers: a FUSE worker reuses them for every request instead of allocating
// up to a few MiB each time. They come from the engine, so that with the gpu engine they are
// page-locked and the chunks in them travel to and from the GPU without a staging copy. Grown in
// powers of two (pinning is slow, so it should happen a few times per thread, not per request);
// freed with the thread. A buffer from another engine is replaced (any memory would be correct,
// but only the engine's own is the fast kind).
HostBuffer& scratch(ChunkEngine& engine, int which, std::size_t n) {
  struct Slot {
    const ChunkEngine* owner = nullptr;
    HostBuffer buf;
  };
  thread_local Slot bufs[3];  // 0: ciphertext read, 1: plaintext, 2: ciphertext sealed
  auto& s = bufs[which];
  if (s.owner != &engine || s.buf.size() < n) {
    std::size_t size = std::size_t{64} << 10;
    while (size < n) size *= 2;
    HostBuffer fresh = engine.allocate_io_buffer(size);
    if (s.buf.data() && s.buf.size()) std::memcpy(fresh.data(), s.buf.data(), std::min(s.buf.size(), size));
    s.buf = std::move(fresh);
    s.owner = &engine;
  }
  return s.buf;
}

// Whether any chunk of a run of on-disk chunks (each disk_chunk bytes, the last maybe shorter)
// is all zeros, which is how a hole reads. Ciphertext is random: the scan of a written chunk
// stops at its first byte.
bool any_chunk_is_hole(const std::uint8_t* p, std::size_t len, std::uint64_t disk_chunk) {
  for (std::size_t at = 0; at < len; at += disk_chunk)
    if (all_zero(p + at, std::min<std::size_t>(disk_chunk, len - at))) return true;
  return false;
}

}  // namespace

ContentFile::ContentFile(int fd, const ChunkLayout& layout, ChunkEngine& engine, const KeyRing& keys, FileLabel label,
                         ChunkJournal* journal, BackingIo* io)
    : fd_(fd),
      io_(layout.aligned() ? io : nullptr),  // format 1's chunks are not aligned: always buffered
      layout_(layout),
      engine_(engine),
      keys_(keys),
      label_(std::move(label)),
      journal_(journal) {}

ContentFile::~ContentFile() {
  for (int d : direct_fds_) ::close(d);
}

void ContentFile::set_fd(int fd) {
  std::lock_guard lk(direct_mu_);
  fd_.store(fd);
  direct_fd_.store(-2);  // reopened from the new descriptor, with its access mode, when next used
}

int ContentFile::direct_fd() {
  if (!io_ || !io_->want_direct()) return -1;
  const int d = direct_fd_.load(std::memory_order_acquire);
  if (d != -2) return d;
  std::lock_guard lk(direct_mu_);
  if (direct_fd_.load() == -2) {
    const int nd = io_->open_direct(fd_.load(), label_);
    if (nd >= 0) direct_fds_.push_back(nd);
    direct_fd_.store(nd < 0 ? -1 : nd, std::memory_order_release);
  }
  return direct_fd_.load();
}

int ContentFile::direct_fd_for(std::size_t bytes) {
  // A few blocks gain nothing from bypassing the page cache that pays for an open of their own
  // (a second open through /proc and its close, for every small file read or written).
  if (bytes < kDirectOpenMinBytes) {
    const int d = direct_fd_.load(std::memory_order_acquire);
    return d >= 0 ? d : -1;
  }
  return direct_fd();
}

namespace {
constexpr std::uint64_t kDirectAlign = kV2BlockBytes;
bool direct_aligned(const void* p, std::uint64_t off) {
  return reinterpret_cast<std::uintptr_t>(p) % kDirectAlign == 0 && off % kDirectAlign == 0;
}
// What an O_DIRECT read of len bytes reads: whole blocks.
std::size_t direct_read_len(std::size_t len) { return (len + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }
}  // namespace

int ContentFile::direct_fd_for_read(const std::uint8_t* buf, std::size_t len, std::size_t room, std::uint64_t off) {
  const std::size_t rounded = direct_read_len(len);
  const int d = direct_fd_for(rounded);
  return d >= 0 && rounded <= room && direct_aligned(buf, off) ? d : -1;
}

ssize_t ContentFile::pread_data(std::uint8_t* buf, std::size_t len, std::size_t room, std::uint64_t off) {
  if (const int d = direct_fd_for_read(buf, len, room, off); d >= 0) {
    // The last block may be partial: reading it whole stops at the end of the file. Once the len
    // bytes wanted are in, a short read is that end: no second read to hear it again (one per
    // file read to its end, whose last block is seldom whole).
    const ssize_t n = pread_full(d, buf, direct_read_len(len), off, len);
    if (n >= 0) return std::min<ssize_t>(n, static_cast<ssize_t>(len));
    if (n != -EINVAL) return n;
    io_->fall_back(label_.str() + ": an O_DIRECT read failed with EINVAL");
  }
  return pread_full(fd(), buf, len, off);
}

ssize_t ContentFile::pwrite_data(const std::uint8_t* buf, std::size_t len, std::uint64_t off) {
  std::size_t whole = 0;
  if (const int d = direct_fd_for(len); d >= 0 && direct_aligned(buf, off)) {
    // Whole blocks with O_DIRECT; a partial last block (the file's short last chunk) cannot be
    // written so without padding the file past its size, so it goes through the page cache.
    whole = len / kDirectAlign * kDirectAlign;
    if (whole > 0) {
      const ssize_t w = pwrite_full(d, buf, whole, off);
      if (w == -EINVAL) {
        io_->fall_back(label_.str() + ": an O_DIRECT write failed with EINVAL");
        whole = 0;
      } else if (w < 0) {
        return w;
      }
    }
  }
  if (whole == len) return static_cast<ssize_t>(len);
  const ssize_t w = pwrite_full(fd(), buf + whole, len - whole, off + whole);
  return w < 0 ? w : static_cast<ssize_t>(len);
}

void ContentFile::mark_durable() {
  std::shared_lock lk(size_mu_);
  if (size_valid_) durable_size_.store(size_);
}

int ContentFile::corrupt(const std::string& what) {
  log::error(label_.str() + ": " + what);
  return -EIO;
}

void ContentFile::add_open_op(std::vector<ChunkOp>& ops, std::vector<std::array<std::uint8_t, kChunkAadBytes>>& aads,
                              std::uint64_t k, const std::uint8_t* nonce, const std::uint8_t* in, std::uint8_t* out,
                              std::size_t len, const std::uint8_t* tag) {
  aads.push_back(chunk_aad(header_->id, k));
  ChunkOp op;
  op.key = &key_;
  std::copy(nonce, nonce + kChunkNonceOnDisk, op.nonce.begin());
  op.aad = aads.back().data();
  op.aad_len = kChunkAadBytes;
  op.in = in;
  op.out = out;
  op.len = len;
  std::copy(tag, tag + kChunkTagOnDisk, op.tag.begin());
  ops.push_back(op);
}

int ContentFile::open_and_report(std::vector<ChunkOp>& ops, std::uint64_t first_chunk, const std::uint8_t* out) {
  if (!ops.empty()) engine_.open(ops);
  const std::uint64_t C = layout_.chunk_size();
  int result = 0;
  for (const auto& op : ops) {
    if (!op.ok) {
      const std::uint64_t k = first_chunk + static_cast<std::uint64_t>(op.out - out) / C;
      result = corrupt("chunk " + std::to_string(k) + " (plaintext bytes " + std::to_string(k * C) + ".." +
                       std::to_string(k * C + op.len) + ") failed authentication: tampered or damaged");
    }
  }
  return result;
}

int ContentFile::load_size_locked() {
  // An fstat of the open descriptor, not a size known from before the open: on a network share
  // only the open revalidates what the client has cached (NFS's close-to-open rule), so a size
  // from an earlier stat may be another machine's old one.
  struct stat st {};
  if (::fstat(fd(), &st) != 0) return -errno;
  const std::uint64_t file_size = static_cast<std::uint64_t>(st.st_size);
  // The content stream starts at the layout's base offset (a volume's config block precedes it).
  const std::uint64_t base = layout_.base_offset();
  std::uint64_t fragment = 0;
  auto plain = file_size < base ? std::nullopt : layout_.readable_plain_size(file_size - base, &fragment);
  if (plain && fragment) {
    // The last chunk is shorter than its nonce and tag: an append the daemon's death cut short
    // between pages (or a cut by someone else). The whole chunks before it are what the file
    // holds; reading them instead of refusing the whole file keeps every fsynced byte readable.
    // The fragment goes with the next write or truncation at the end. An attacker gains nothing:
    // a cut at a chunk boundary shortens a file without any warning at all.
    log::warning(label_.str() + ": the last " + std::to_string(fragment) +
                 " bytes are an incomplete chunk (a write cut short?); reading the file as its whole chunks (" +
                 std::to_string(*plain) + " bytes)");
  }
  if (!plain) {
    size_valid_ = false;
    fragment_ = 0;
    return corrupt("ciphertext size " + std::to_string(file_size) +
                   " is impossible for this vault's chunk size (truncated or damaged file)");
  }
  size_ = *plain;
  size_valid_ = true;
  fragment_ = fragment;
  durable_size_.store(size_);  // everything there at open may be relied on
  return 0;
}

void ContentFile::assume_new_empty() {
  std::unique_lock lk(size_mu_);
  size_ = 0;
  size_valid_ = true;
  fragment_ = 0;
  durable_size_.store(0);
}

int ContentFile::reload() {
  std::unique_lock lk(size_mu_);
  {
    std::lock_guard hl(header_mu_);
    header_.reset();
    header_ready_.store(false, std::memory_order_relaxed);
  }
  return load_size_locked();
}

std::int64_t ContentFile::plain_size() {
  {
    std::shared_lock lk(size_mu_);
    if (size_valid_) return static_cast<std::int64_t>(size_);
  }
  std::unique_lock lk(size_mu_);
  if (!size_valid_) {
    int r = load_size_locked();
    if (r < 0) return r;
  }
  return static_cast<std::int64_t>(size_);
}

void ContentFile::forget_header_locked() {
  std::lock_guard hl(header_mu_);
  header_.reset();
  header_ready_.store(false, std::memory_order_relaxed);
}

int ContentFile::ensure_header_locked(bool create, const std::uint8_t* read_header,
                                      std::optional<std::array<std::uint8_t, kFileHeaderBytes>>* to_write) {
  if (to_write) to_write->reset();
  // Every read and write comes here: once the header is known, without a lock (it is dropped
  // only under size_mu_ held exclusively, so never while a caller, who holds it, reads it).
  if (header_ready_.load(std::memory_order_acquire)) return 0;
  std::lock_guard hl(header_mu_);
  if (header_) return 0;
  std::array<std::uint8_t, kFileHeaderBytes> raw{};
  // A file that holds no data yet gets a fresh header even when one is there: a header-only file
  // is what an attacker with write access would plant to make this file share another file's ID
  // (and so its key and chunk AADs), which the gocryptfs audit calls file ID poisoning. So when
  // the size says so, whatever is there need not even be read.
  const bool empty = size_valid_ && size_ == 0;
  ssize_t n = 0;
  if (!(create && empty)) {
    if (read_header) {
      std::memcpy(raw.data(), read_header, raw.size());
      n = static_cast<ssize_t>(raw.size());
    } else {
      n = pread_full(fd(), raw.data(), raw.size(), layout_.base_offset());
      if (n < 0) return static_cast<int>(n);
    }
  }
  if (create && (n == 0 || empty)) {
    FileHeader h = FileHeader::random();
    auto enc = h.encode(static_cast<std::uint16_t>(layout_.format()));
    if (to_write) {
      *to_write = enc;  // the caller writes it with its chunks
    } else {
      ssize_t w = pwrite_full(fd(), enc.data(), enc.size(), layout_.base_offset());
      if (w < 0) {
        (void)::ftruncate(fd(), static_cast<off_t>(layout_.base_offset()));  // an empty stream, never a torn header
        return static_cast<int>(w);
      }
    }
    header_ = h;
  } else {
    if (static_cast<std::size_t>(n) < raw.size()) return corrupt("file header is truncated");
    auto h = FileHeader::decode(raw, static_cast<std::uint16_t>(layout_.format()));
    if (!h)
      return corrupt("file header is not a gpucryptfs version " + std::to_string(layout_.format()) +
                     " header (wrong magic or version)");
    header_ = *h;
  }
  key_ = keys_.content_key(header_->id);
  header_ready_.store(true, std::memory_order_release);
  return 0;
}

int ContentFile::open_chunks_locked(ChunkRange r, std::uint8_t* out, CipherSeen* seen, std::size_t out_room) {
  if (layout_.aligned()) return open_chunks_v2_locked(r, out, seen, out_room);
  const std::uint64_t C = layout_.chunk_size();
  const std::uint64_t D = layout_.disk_chunk_size();
  const std::uint64_t disk_begin = layout_.disk_offset(r.first);
  const std::uint64_t disk_end =
      std::min(layout_.disk_offset(r.last + 1), layout_.base_offset() + layout_.cipher_size(size_));
  if (disk_end <= disk_begin) return corrupt("internal: read past the end of the file");
  const std::size_t disk_len = disk_end - disk_begin;
  // A header not known yet lies right before chunk 0: the read of chunk 0 brings it along (a
  // small file's first read is then one backing call).
  const bool with_header = r.first == 0 && !header_known();
  const std::uint64_t read_from = with_header ? layout_.base_offset() : disk_begin;
  const std::size_t read_len = disk_end - read_from;
  auto& rd = scratch(engine_, 0, read_len);
  ssize_t n = pread_full(fd(), rd.data(), read_len, read_from);
  if (n < 0) return static_cast<int>(n);
  if (static_cast<std::size_t>(n) != read_len)
    return corrupt("file is shorter than its size says (truncated underneath the mount?)");
  const std::uint8_t* ct = rd.data() + (disk_begin - read_from);
  if (seen) *seen = CipherSeen{r, ct, disk_len};

  int hr = ensure_header_locked(false, with_header ? rd.data() : nullptr);
  if (hr < 0) return hr;

  std::vector<ChunkOp> ops;
  std::vector<std::array<std::uint8_t, kChunkAadBytes>> aads;
  ops.reserve(r.count());
  aads.reserve(r.count());
  for (std::uint64_t k = r.first; k <= r.last; ++k) {
    const std::uint64_t plen = layout_.chunk_plain_len(k, size_);
    std::uint8_t* dst = out + (k - r.first) * C;
    const std::uint8_t* src = ct + (k - r.first) * D;
    if (all_zero(src, plen + kChunkOverhead)) {  // a hole: never written, or punched
      if (seen) seen->hole = true;
      std::memset(dst, 0, plen);
      continue;
    }
    // Format 1 keeps each chunk as nonce | ciphertext | tag.
    add_open_op(ops, aads, k, src, src + kChunkNonceOnDisk, dst, plen, src + kChunkNonceOnDisk + plen);
  }
  return open_and_report(ops, r.first, out);
}

ssize_t ContentFile::read(std::uint64_t off, std::size_t len, std::uint8_t* out) {
  const std::uint8_t* data = nullptr;
  const ssize_t n = read_view(off, len, &data);
  if (n > 0) std::memcpy(out, data, static_cast<std::size_t>(n));
  return n;
}

void ContentFile::prepare_thread(ChunkEngine& engine, const ChunkLayout& layout, std::size_t max_request) {
  // A request of max_request bytes at any offset touches at most this many chunks.
  const std::uint64_t chunks = max_request / layout.chunk_size() + 2;
  // Format 1 reads a header before chunk 0, format 2 a metadata block before the data.
  scratch(engine, 0, chunks * layout.disk_chunk_size() + (layout.aligned() ? kV2BlockBytes : kFileHeaderBytes));
  scratch(engine, 1, chunks * layout.chunk_size());
  scratch(engine, 2, chunks * layout.disk_chunk_size());
}

ssize_t ContentFile::read_view(std::uint64_t off, std::size_t len, const std::uint8_t** data) {
  return read_view(off, len, data, nullptr, 0);
}

ssize_t ContentFile::read_view(std::uint64_t off, std::size_t len, const std::uint8_t** data, std::uint8_t* room,
                               std::size_t room_bytes) {
  std::shared_lock lk(size_mu_);
  if (!size_valid_) {
    lk.unlock();
    std::int64_t s = plain_size();
    if (s < 0) return s;
    lk.lock();
  }
  if (off >= size_ || len == 0) return 0;
  len = static_cast<std::size_t>(std::min<std::uint64_t>(len, size_ - off));
  const ChunkRange r = layout_.chunks_for(off, len);
  auto guard = chunk_locks_.lock(r.first, r.last, false);
  const std::uint64_t C = layout_.chunk_size();
  // open_chunks_locked writes up to whole chunks: into room only when all of them fit there.
  const bool into_room = room && off == r.first * C && r.count() * C <= room_bytes;
  HostBuffer* plain = into_room ? nullptr : &scratch(engine_, 1, r.count() * C);
  std::uint8_t* out = into_room ? room : plain->data();
  int rc = open_chunks_locked(r, out, nullptr, into_room ? room_bytes : plain->size());
  if (rc < 0) return rc;
  *data = out + (off - r.first * C);
  return static_cast<ssize_t>(len);
}

int ContentFile::seal_and_write_locked(ChunkRange r, const std::uint8_t* plain, std::uint64_t new_size,
                                       const CipherSeen* seen) {
  std::vector<const std::uint8_t*> plains(r.count());
  for (std::uint64_t i = 0; i < r.count(); ++i) plains[i] = plain + i * layout_.chunk_size();
  return seal_and_write_locked(r, plains.data(), new_size, seen);
}

int ContentFile::seal_and_write_locked(ChunkRange r, const std::uint8_t* const* plains, std::uint64_t new_size,
                                       const CipherSeen* seen) {
  if (layout_.aligned()) return seal_and_write_v2_locked(r, plains, new_size, seen);
  const std::uint64_t D = layout_.disk_chunk_size();
  // A new file's header goes out with chunk 0, which follows it on disk: one write.
  std::optional<std::array<std::uint8_t, kFileHeaderBytes>> new_header;
  int hr = ensure_header_locked(true, nullptr, r.first == 0 ? &new_header : nullptr);
  if (hr < 0) return hr;

  const std::uint64_t last_len = layout_.chunk_plain_len(r.last, new_size);
  const std::size_t disk_len = (r.count() - 1) * D + last_len + kChunkOverhead;
  auto& ct = scratch(engine_, 2, disk_len);
  const auto& ops = seal_chunks_locked(r, plains, new_size, ct.data() + kChunkNonceOnDisk, D);
  for (std::uint64_t i = 0; i < r.count(); ++i) {
    std::uint8_t* base = ct.data() + i * D;
    std::copy(ops[i].nonce.begin(), ops[i].nonce.end(), base);
    std::copy(ops[i].tag.begin(), ops[i].tag.end(), base + kChunkNonceOnDisk + ops[i].len);
  }

  const std::uint64_t disk_off = layout_.disk_offset(r.first);
  const std::uint64_t old_cipher = layout_.base_offset() + layout_.cipher_size(size_);
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
  if (int prc = protect_locked(r, std::max(old_cipher, disk_off + disk_len), seen, &pending, &pre_image, &pre_len,
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
                               !any_chunk_is_hole(pre_image, pre_len, layout_.disk_chunk_size());
  if (!pure_append && !(inside_old && (seen_whole || journaled_whole)) &&
      ::fallocate(fd(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(disk_off), static_cast<off_t>(disk_len)) != 0 &&
      (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)) {
    // EFBIG: past the filesystem's largest file, where pwrite would stop part-way too.
    const int err = errno;
    log::warning(label_.str() + (err == EFBIG ? ": write refused: file too large" : ": write refused: disk full"));
    return -err;
  }
  ssize_t w = new_header ? pwrite2_full(fd(), new_header->data(), kFileHeaderBytes, ct.data(), disk_len,
                                        disk_off - kFileHeaderBytes)
                         : pwrite_full(fd(), ct.data(), disk_len, disk_off);
  if (w < 0) {
    // A rewrite that failed part-way (EIO, say) may have left a torn mix: put the old chunks back.
    if (pre_image) (void)pwrite_full(fd(), pre_image, pre_len, layout_.disk_offset(pre_first));
    // Cut off whatever part of the new chunks landed, so the file keeps a valid size (with a
    // header that went with them, back to what the file was: no header, or one the next write
    // replaces, as the file holds nothing).
    if (new_header) {
      forget_header_locked();
      (void)::ftruncate(fd(), static_cast<off_t>(old_cipher));
    } else if (extends) {
      (void)::ftruncate(fd(), static_cast<off_t>(std::max(old_cipher, layout_.base_offset() + kFileHeaderBytes)));
    }
    if (w == -ENOSPC || w == -EDQUOT) log::warning(label_.str() + ": write failed: disk full");
    return static_cast<int>(w);
  }
  return 0;
}

int ContentFile::read_v2_locked(ChunkRange r, std::uint8_t* data, std::size_t room, bool room_in_front,
                                std::uint8_t* meta, std::uint8_t* header, bool* got_header) {
  const std::uint64_t C = layout_.chunk_size();
  const std::uint64_t base = layout_.base_offset();
  *got_header = false;
  const auto short_file = [&] { return corrupt("file is shorter than its size says (truncated underneath the mount?)"); };
  const auto take_header = [&](const std::uint8_t* from_base) {  // the bytes read from the header on
    std::memcpy(header, from_base, kFileHeaderBytes);
    *got_header = true;
  };
  if (layout_.is_inline(size_)) {
    // One chunk, its entry and its ciphertext in the header block: one read (from the header
    // on, when it is wanted too).
    std::array<std::uint8_t, kV2BlockBytes> block;
    const std::uint64_t from = header ? base : layout_.nonce_offset(0), to = layout_.data_offset(0, size_) + size_;
    const ssize_t n = pread_full(fd(), block.data(), to - from, from);
    if (n < 0) return static_cast<int>(n);
    if (static_cast<std::uint64_t>(n) != to - from) return short_file();
    std::memcpy(meta, block.data() + (layout_.nonce_offset(0) - from), kChunkOverhead);
    std::memcpy(data, block.data() + (to - from - size_), size_);
    if (header) take_header(block.data());
    return 0;
  }
  for (std::uint64_t a = r.first; a <= r.last;) {
    // A group at a time: its entries, then its chunks' ciphertext.
    const std::uint64_t g = layout_.group_of(a);
    const std::uint64_t b = std::min(r.last, (g + 1) * kV2ChunksPerGroup - 1);
    const std::uint64_t n = b - a + 1;
    const std::uint64_t block_at = layout_.meta_block_offset(g), entries_at = layout_.nonce_offset(a);
    const std::uint64_t len = (n - 1) * C + layout_.chunk_plain_len(b, size_);
    const std::size_t at = (a - r.first) * C;
    const std::uint64_t data_at = layout_.data_offset(a, size_);
    const bool want_header = header && g == 0;
    std::uint8_t* const entries = meta + (a - r.first) * kChunkOverhead;
    if (room_in_front && a == r.first && data_at == block_at + kV2BlockBytes &&
        direct_fd_for_read(data + at, len, room - at, data_at) < 0) {
      // The run starts at its group's first chunk, so its data follows the metadata block
      // directly, and it goes through the page cache anyway: block and data in one read, the
      // block into the room in front of data (a small file's whole read, header included).
      std::uint8_t* const block = data - kV2BlockBytes;
      const ssize_t got = pread_full(fd(), block, kV2BlockBytes + len, block_at);
      if (got < 0) return static_cast<int>(got);
      if (static_cast<std::uint64_t>(got) != kV2BlockBytes + len) return short_file();
      std::memcpy(entries, block + (entries_at - block_at), n * kChunkOverhead);
      if (want_header) take_header(block);
    } else {
      // The entries (from the header on, when it is wanted: both lie in group 0's block).
      std::array<std::uint8_t, kV2BlockBytes> block;
      const std::uint64_t from = want_header ? block_at : entries_at, to = entries_at + n * kChunkOverhead;
      ssize_t got = pread_full(fd(), block.data(), to - from, from);
      if (got < 0) return static_cast<int>(got);
      if (static_cast<std::uint64_t>(got) != to - from) return short_file();
      std::memcpy(entries, block.data() + (entries_at - from), n * kChunkOverhead);
      if (want_header) take_header(block.data());
      got = pread_data(data + at, len, room - at, data_at);
      if (got < 0) return static_cast<int>(got);
      if (static_cast<std::uint64_t>(got) != len) return short_file();
    }
    a = b + 1;
  }
  return 0;
}

int ContentFile::open_chunks_v2_locked(ChunkRange r, std::uint8_t* out, CipherSeen* seen, std::size_t out_room) {
  const std::uint64_t C = layout_.chunk_size();
  if (r.last >= layout_.chunk_count(size_)) return corrupt("internal: read past the end of the file");
  // The ciphertext of chunk i lies at i * C, where its plaintext goes: with nobody to keep the
  // ciphertext for (seen), it is read into out and opened in place, one buffer of the request's
  // size instead of two passing through the cache (and a chunk that fails is zeroed all the same).
  // Through the scratch buffer instead, the data sits a block's distance from its start: a
  // metadata block read in one call with the data after it lands in front (read_v2_locked), and
  // the start is page-aligned, so the data is too, as O_DIRECT wants it. Nothing is ever written
  // in front of out: in place, block and data are read apart.
  const bool in_place = !seen && out_room >= r.count() * C;
  std::uint8_t* ct = out;
  std::size_t ct_room = out_room;
  if (!in_place) {
    auto& buf = scratch(engine_, 0, kV2BlockBytes + r.count() * C);
    ct = buf.data() + kV2BlockBytes;
    ct_room = buf.size() - kV2BlockBytes;
  }
  thread_local std::vector<std::uint8_t> entries;  // valid, like ct, until this thread's next open
  entries.resize(r.count() * kChunkOverhead);
  std::array<std::uint8_t, kFileHeaderBytes> header{};
  bool got_header = false;
  if (int rc = read_v2_locked(r, ct, ct_room, !in_place, entries.data(), header_known() ? nullptr : header.data(),
                              &got_header);
      rc < 0)
    return rc;
  const std::uint64_t data_len = (r.count() - 1) * C + layout_.chunk_plain_len(r.last, size_);
  if (seen) *seen = CipherSeen{r, ct, data_len, false, entries.data()};

  int hr = ensure_header_locked(false, got_header ? header.data() : nullptr);
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
    const std::uint64_t plen = layout_.chunk_plain_len(k, size_);
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
    add_open_op(ops, aads, k, entry, src, dst, plen, entry + kChunkNonceOnDisk);
  }
  if (in_place && !ops.empty()) {
    // Where a chunk fails in place, the read is done again the other way before anything is
    // reported: an engine that lost its GPU part-way through may have written into the very
    // bytes its fallback then opens (here they are its input too). A damaged chunk fails there
    // as well, and is reported and zeroed as always.
    engine_.open(ops);
    if (std::all_of(ops.begin(), ops.end(), [](const ChunkOp& op) { return op.ok; })) return 0;
    return open_chunks_v2_locked(r, out, nullptr, 0);
  }
  return open_and_report(ops, r.first, out);
}

std::vector<ChunkOp>& ContentFile::chunk_ops_locked(ChunkRange r, const std::uint8_t* const* plains,
                                                   std::uint64_t new_size, std::uint8_t* out, std::size_t stride) {
  // Per thread, reused by every write (none of them calls here again while it runs).
  thread_local std::vector<ChunkOp> ops;
  thread_local std::vector<std::array<std::uint8_t, kChunkAadBytes>> aads;
  thread_local std::vector<std::uint8_t> nonces;
  const std::uint64_t n = r.count();
  ops.assign(n, ChunkOp{});
  aads.resize(n);
  nonces.resize(n * kChunkNonceOnDisk);
  random_public_bytes(nonces);  // one call to the generator for every nonce of the batch
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t k = r.first + i;
    aads[i] = chunk_aad(header_->id, k);
    ChunkOp& op = ops[i];
    op.key = &key_;
    std::copy_n(nonces.data() + i * kChunkNonceOnDisk, kChunkNonceOnDisk, op.nonce.begin());
    op.aad = aads[i].data();
    op.aad_len = kChunkAadBytes;
    op.in = plains[i];
    op.len = layout_.chunk_plain_len(k, new_size);
    op.out = out + i * stride;
  }
  return ops;
}

std::vector<ChunkOp>& ContentFile::seal_chunks_locked(ChunkRange r, const std::uint8_t* const* plains,
                                                     std::uint64_t new_size, std::uint8_t* out, std::size_t stride) {
  auto& ops = chunk_ops_locked(r, plains, new_size, out, stride);
  engine_.seal(ops);
  return ops;
}

int ContentFile::seal_and_write_v2_locked(ChunkRange r, const std::uint8_t* const* plains, std::uint64_t new_size,
                                          const CipherSeen* seen) {
  const std::uint64_t C = layout_.chunk_size();
  // A new file's header goes out with chunk 0's entry, which lies in the same block: one write.
  std::optional<std::array<std::uint8_t, kFileHeaderBytes>> new_header;
  int hr = ensure_header_locked(true, nullptr, r.first == 0 ? &new_header : nullptr);
  if (hr < 0) return hr;

  const std::uint64_t n = r.count();
  auto& ct = scratch(engine_, 2, n * C);
  // Per thread, reused by every request (none of them calls here again while it runs).
  thread_local std::vector<std::uint8_t> entries;
  entries.resize(n * kChunkOverhead);
  // Each chunk's ciphertext where an aligned write takes it from. Sealed below, once the journal
  // and the reservation are done: the engine hands the chunks back in parts, and each part is
  // written while later ones are still being sealed.
  auto& ops = chunk_ops_locked(r, plains, new_size, ct.data(), C);

  const std::uint64_t old_cipher = layout_.base_offset() + layout_.cipher_size(size_);
  const std::uint64_t last_len = layout_.chunk_plain_len(r.last, new_size);
  const std::uint64_t write_end = layout_.data_offset(r.last, new_size) + last_len;
  const bool extends = write_end > old_cipher;
  // Nothing that exists is touched: every chunk written lies past the old last chunk. (Chunk 0
  // of an inline file moving to its aligned place is not such a write: its entry is rewritten.)
  const bool pure_append = r.first >= layout_.chunk_count(size_);
  ChunkJournal::Pending pending;
  const std::uint8_t* pre_image = nullptr;
  std::size_t pre_len = 0;
  std::uint64_t pre_first = 0;
  if (int prc = protect_locked(r, std::max(old_cipher, write_end), seen, &pending, &pre_image, &pre_len, &pre_first);
      prc < 0)
    return prc;
  const bool inside_old = write_end <= old_cipher && !(layout_.is_inline(size_) != layout_.is_inline(new_size));
  const bool seen_whole = seen && !seen->hole && seen->range.first == r.first && seen->range.last == r.last;
  const bool journaled_whole = pre_image && pre_first == r.first &&
                               pre_len == chunk_forms_bytes(layout_, r.first, r.last, new_size) &&
                               !any_chunk_is_hole(pre_image, pre_len, C + kChunkOverhead);
  // The groups the write touches, each as [a, b]: its entries are one run in its metadata block,
  // its ciphertext one run of aligned blocks (an inline file: entry and ciphertext in block 0).
  struct Part {
    std::uint64_t a, b;
  };
  thread_local std::vector<Part> groups;  // per thread: no allocation per write
  groups.clear();
  for (std::uint64_t a = r.first; a <= r.last;) {
    const std::uint64_t b = std::min(r.last, (layout_.group_of(a) + 1) * kV2ChunksPerGroup - 1);
    groups.push_back({a, b});
    a = b + 1;
  }
  const auto data_len = [&](std::uint64_t a, std::uint64_t b) {
    return (b - a) * C + layout_.chunk_plain_len(b, new_size);
  };
  if (!pure_append && !(inside_old && (seen_whole || journaled_whole))) {
    // Reserve first, as format 1 does (see there): a full disk fails here, before anything changed.
    // Chunks just read whole, none a hole, had their entries written when they were sealed: those
    // entries' blocks hold their space already, and only the data needs reserving (a write that
    // grows a file's partial last chunk: one fallocate instead of two).
    const bool entries_on_disk = seen_whole;
    for (const Part& p : groups) {
      const std::uint64_t eo = layout_.nonce_offset(p.a), el = (p.b - p.a + 1) * kChunkOverhead;
      const std::uint64_t d0 = layout_.data_offset(p.a, new_size);
      if (((!entries_on_disk && ::fallocate(fd(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(eo), static_cast<off_t>(el)) != 0) ||
           ::fallocate(fd(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(d0), static_cast<off_t>(data_len(p.a, p.b))) != 0) &&
          (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)) {
        const int err = errno;
        log::warning(label_.str() + (err == EFBIG ? ": write refused: file too large" : ": write refused: disk full"));
        return -err;
      }
    }
  }
  // Part of the write may have landed when it fails: put back the chunks it protected, at their
  // old places, and cut off what it appended.
  auto undo = [&] {
    if (pre_image) (void)write_chunk_forms(fd(), layout_, pre_first, size_, pre_image, pre_len);
    if (new_header) {  // as in format 1: back to what the file was
      forget_header_locked();
      (void)::ftruncate(fd(), static_cast<off_t>(old_cipher));
    } else if (extends) {
      (void)::ftruncate(fd(), static_cast<off_t>(std::max(old_cipher, layout_.base_offset() + kFileHeaderBytes)));
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
  if (layout_.is_inline(new_size)) {
    // One write: entry, the gap before the inline offset (zeros), ciphertext.
    engine_.seal(ops);
    fill_entries(0, 0);
    // A new file's header too, from the block's start.
    std::array<std::uint8_t, kV2BlockBytes> block{};
    const std::uint64_t from = new_header ? layout_.base_offset() : layout_.nonce_offset(0);
    const std::uint64_t data_at = layout_.data_offset(0, new_size) - from;
    if (new_header) std::memcpy(block.data(), new_header->data(), kFileHeaderBytes);
    std::memcpy(block.data() + (layout_.nonce_offset(0) - from), entries.data(), kChunkOverhead);
    std::memcpy(block.data() + data_at, ct.data(), last_len);
    w = pwrite_full(fd(), block.data(), data_at + last_len, from);
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
          const std::uint64_t b = std::min(last, (layout_.group_of(a) + 1) * kV2ChunksPerGroup - 1);
          const std::uint8_t* e = entries.data() + (a - r.first) * kChunkOverhead;
          const std::size_t elen = (b - a + 1) * kChunkOverhead;
          if (pass == 0 && a == 0 && new_header) {
            // A new file's header, the zeros up to the entries, and the entries of chunk 0 on.
            std::array<std::uint8_t, kV2EntriesOffset> head{};
            std::memcpy(head.data(), new_header->data(), kFileHeaderBytes);
            w = pwrite2_full(fd(), head.data(), head.size(), e, elen, layout_.base_offset());
          } else {
            w = pass == 0 ? pwrite_full(fd(), e, elen, layout_.nonce_offset(a))
                          : pwrite_data(ct.data() + (a - r.first) * C, data_len(a, b), layout_.data_offset(a, new_size));
          }
          a = b + 1;
        }
      }
      return w >= 0;
    };
    try {
      engine_.seal_in_parts(ops, ends, write_parts);
    } catch (...) {
      undo();
      throw;
    }
  }
  if (w < 0) {
    undo();
    if (w == -ENOSPC || w == -EDQUOT) log::warning(label_.str() + ": write failed: disk full");
    return static_cast<int>(w);
  }
  return 0;
}

std::string ContentFile::path_hint() {
  const std::uint64_t epoch = journal_->names_epoch();  // before reading the link: a rename after it bumps
  {
    std::shared_lock lk(hint_mu_);  // every protected write reads it: readers share
    if (hint_epoch_ == epoch) return hint_;
  }
  std::string h = journal_->hint_for_fd(fd());
  std::lock_guard lk(hint_mu_);
  hint_ = h;
  hint_epoch_ = epoch;
  return h;
}

int ContentFile::protect_locked(ChunkRange r, std::uint64_t new_cipher, const CipherSeen* seen,
                                ChunkJournal::Pending* pending, const std::uint8_t** pre_image, std::size_t* pre_len,
                                std::uint64_t* pre_first) {
  *pre_image = nullptr;
  if (!journal_) return 0;
  const std::uint64_t C = layout_.chunk_size();
  // Only chunks whose bytes exist on disk and may hold durable data. Fresh chunks past the old
  // end, and chunks written only since the last fsync, are not journaled: sequential appends
  // with periodic fsync journal about one chunk (the partial last one) per fsync.
  const std::uint64_t limit = std::min(durable_size_.load(), size_);
  if (r.first * C >= limit) return 0;
  const ChunkRange run{r.first, std::min(r.last, (limit - 1) / C)};
  const std::uint64_t begin = layout_.aligned() ? 0 : layout_.disk_offset(run.first);
  const std::uint64_t end = layout_.aligned() ? chunk_forms_bytes(layout_, run.first, run.last, size_)
                                              : layout_.disk_offset(run.last) +
                                                    layout_.chunk_plain_len(run.last, size_) + kChunkOverhead;
  const std::uint8_t* bytes;
  if (layout_.aligned()) {
    // The journal holds chunk forms (nonce | ciphertext | tag): gathered from what the caller
    // just read when it read exactly these chunks, else from the file.
    thread_local std::vector<std::uint8_t> forms;
    forms.resize(end);
    if (seen && seen->meta && seen->range.first == run.first && seen->range.last == run.last) {
      std::uint64_t at = 0;
      for (std::uint64_t k = run.first; k <= run.last; ++k) {
        const std::uint64_t len = layout_.chunk_plain_len(k, size_);
        const std::uint8_t* d = seen->data + (k - run.first) * C;
        const std::uint8_t* e = seen->meta + (k - run.first) * kChunkOverhead;
        std::uint8_t* f = forms.data() + at;
        if (v2_is_hole(all_zero(d, len), len, all_zero(e, kChunkOverhead))) {
          std::memset(f, 0, len + kChunkOverhead);
        } else {
          std::memcpy(f, e, kChunkNonceOnDisk);
          std::memcpy(f + kChunkNonceOnDisk, d, len);
          std::memcpy(f + kChunkNonceOnDisk + len, e + kChunkNonceOnDisk, kChunkTagOnDisk);
        }
        at += len + kChunkOverhead;
      }
    } else {
      const ssize_t n = read_chunk_forms(fd(), layout_, run.first, run.last, size_, forms.data());
      if (n < 0) return static_cast<int>(n);
      if (static_cast<std::uint64_t>(n) != end)
        return corrupt("file is shorter than its size says (truncated underneath the mount?)");
    }
    bytes = forms.data();
  } else if (seen && seen->range.first == run.first && seen->range.last == run.last && seen->len == end - begin) {
    // The caller read these very bytes under the locks it still holds (a rewrite of part of a
    // chunk opens it first): they are what is on disk now.
    bytes = seen->data;
  } else {
    thread_local std::vector<std::uint8_t> buf;
    buf.resize(end - begin);
    ssize_t n = pread_full(fd(), buf.data(), buf.size(), begin);  // normally a page-cache hit
    if (n < 0) return static_cast<int>(n);
    if (static_cast<std::size_t>(n) != buf.size())
      return corrupt("file is shorter than its size says (truncated underneath the mount?)");
    bytes = buf.data();
  }
  const std::uint64_t old_cipher = layout_.base_offset() + layout_.cipher_size(size_);
  int rc = journal_->record(header_->id, run.first, static_cast<std::uint32_t>(run.count()), layout_.base_offset(),
                            old_cipher, new_cipher, path_hint(), bytes, end - begin, pending);
  if (rc < 0) {
    // A full disk under the journal must not stop rewrites that need no new space: go on
    // without the record, and say so (once per process).
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log::warning(label_.str() + ": crash journal: cannot write a record (" + std::strerror(-rc) +
                   "); rewrites go on unprotected against the daemon dying while that lasts");
    return 0;
  }
  *pre_image = bytes;
  *pre_len = end - begin;
  *pre_first = run.first;
  return 0;
}

ssize_t ContentFile::write_locked(std::uint64_t off, const std::uint8_t* in, std::size_t len) {
  const std::uint64_t C = layout_.chunk_size();
  const std::uint64_t end = off + len;
  const std::uint64_t new_size = std::max(size_, end);
  const ChunkRange r = layout_.chunks_for(off, len);

  // A chunk whose new contents the write supplies whole is sealed straight from `in` (with the
  // daemon's receive buffers in engine memory, that is also how the gpu engine reads it: no copy
  // at all). Only the edge chunks that keep old bytes, or that the write covers only in part,
  // are assembled in the scratch buffer: slot 0 for the first chunk, slot 1 for the last.
  auto covered = [&](std::uint64_t k) {
    const std::uint64_t cs = k * C, ce = cs + layout_.chunk_plain_len(k, new_size);
    return off <= cs && end >= ce;
  };
  // An edge chunk the write does not supply whole: its old bytes, zeros past the old end, and the
  // written part over them, in `slot`.
  CipherSeen seen;  // the ciphertext of the last edge chunk opened
  auto assemble = [&](std::uint64_t k, std::uint8_t* slot) -> int {
    const std::uint64_t cs = k * C;
    const std::uint64_t old_len = layout_.chunk_plain_len(k, size_);
    const std::uint64_t new_len = layout_.chunk_plain_len(k, new_size);
    if (old_len > 0) {
      int rc = open_chunks_locked({k, k}, slot, &seen);
      if (rc < 0) return rc;
    }
    if (new_len > old_len) std::memset(slot + old_len, 0, new_len - old_len);
    const std::uint64_t from = std::max(off, cs), to = std::min(end, cs + new_len);
    std::memcpy(slot + (from - cs), in + (from - off), to - from);
    return 0;
  };
  thread_local std::vector<const std::uint8_t*> plains;  // per thread: no allocation per write
  plains.assign(r.count(), nullptr);
  auto& edges = scratch(engine_, 1, 2 * C);
  for (std::uint64_t k = r.first; k <= r.last; ++k) {
    if (covered(k)) {  // every chunk between the edges is
      plains[k - r.first] = in + (k * C - off);
      continue;
    }
    std::uint8_t* slot = edges.data() + (k == r.first ? 0 : C);
    if (int rc = assemble(k, slot); rc < 0) return rc;
    plains[k - r.first] = slot;
  }
  int rc = seal_and_write_locked(r, plains.data(), new_size, &seen);
  if (rc < 0) return rc;
  // Only a growing write changes the size, and it holds size_mu_ exclusively; writes inside the
  // file run under the shared lock alongside readers of size_, so they must not store to it.
  // Its first new chunk, at least a nonce and a tag long, went over any fragment.
  if (new_size != size_) {
    size_ = new_size;
    fragment_ = 0;
  }
  return static_cast<ssize_t>(len);
}

ssize_t ContentFile::write(std::uint64_t off, const std::uint8_t* in, std::size_t len) {
  if (len == 0) return 0;
  {
    std::shared_lock lk(size_mu_);
    if (size_valid_ && off + len <= size_ && size_ > 0) {
      const ChunkRange r = layout_.chunks_for(off, len);
      auto guard = chunk_locks_.lock(r.first, r.last, true);
      return write_locked(off, in, len);
    }
  }
  // Writes that grow the file change the size and the last chunk's length: run them alone.
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) return r;
  return write_growing_locked(off, in, len);
}

ssize_t ContentFile::append(const std::uint8_t* in, std::size_t len, std::uint64_t* at) {
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) return r;
  if (at) *at = size_;
  if (len == 0) return 0;
  return write_growing_locked(size_, in, len);
}

int ContentFile::load_size_if_needed_locked() { return size_valid_ ? 0 : load_size_locked(); }

ssize_t ContentFile::write_growing_locked(std::uint64_t off, const std::uint8_t* in, std::size_t len) {
  const std::uint64_t old_size = size_;
  if (off > size_) {
    int r = truncate_locked(off);
    if (r < 0) return r;
  }
  const ssize_t n = write_locked(off, in, len);
  // The gap before off was filled only for this write: a failed write (a full disk) must not
  // leave the file longer than it was.
  if (n < 0 && size_ != old_size) (void)truncate_locked(old_size);
  return n;
}

int ContentFile::drop_fragment_locked() {
  if (fragment_ == 0) return 0;
  // The whole chunks stay; a file of a header and a fragment keeps its header.
  const std::uint64_t keep = layout_.base_offset() + std::max<std::uint64_t>(layout_.cipher_size(size_), kFileHeaderBytes);
  if (::ftruncate(fd(), static_cast<off_t>(keep)) != 0) return -errno;
  fragment_ = 0;
  return 0;
}

int ContentFile::truncate_locked(std::uint64_t new_size) {
  const std::uint64_t C = layout_.chunk_size();
  // Truncating to the size the file reads as still replaces a fragment (docs/FORMAT.md "Sizes"),
  // and gives back space reserved past the end (fallocate KEEP_SIZE), as ext4's truncate does.
  if (new_size == size_) {
    if (int rc = drop_fragment_locked(); rc < 0) return rc;
    struct stat st {};
    if (::fstat(fd(), &st) == 0 && static_cast<std::uint64_t>(st.st_blocks) * 512 > static_cast<std::uint64_t>(st.st_size))
      (void)::ftruncate(fd(), st.st_size);
    return 0;
  }
  if (new_size == 0) {
    if (::ftruncate(fd(), static_cast<off_t>(layout_.base_offset())) != 0) return -errno;
    std::lock_guard hl(header_mu_);
    header_.reset();  // the next write starts a new file ID, hence a new key
    header_ready_.store(false, std::memory_order_relaxed);
    size_ = 0;
    fragment_ = 0;
    durable_size_.store(0);
    return 0;
  }
  if (layout_.is_inline(new_size) && size_ > C) {
    // Format 2, shrinking into an inline file: cut to chunk 0 alone first, so that the inline
    // ciphertext, which lies where the entries of chunks 3 and up do, overwrites no entry of a
    // chunk that is still there should the daemon die in between.
    if (int rc = truncate_locked(C); rc < 0) return rc;
  }
  auto& plain = scratch(engine_, 1, C);
  std::optional<std::uint64_t> resealed;  // the chunk already rewritten for the new size
  if (new_size < size_) {
    const std::uint64_t k = layout_.chunk_of(new_size);
    if (new_size % C != 0) {
      CipherSeen seen;
      int rc = open_chunks_locked({k, k}, plain.data(), &seen);
      if (rc < 0) return rc;
      rc = seal_and_write_locked({k, k}, plain.data(), new_size, &seen);
      if (rc < 0) return rc;
      resealed = k;
    }
  } else if (size_ % C != 0) {
    // The old last chunk is partial: it grows (zero-padded) before the rest becomes holes.
    const std::uint64_t k = layout_.chunk_of(size_);
    CipherSeen seen;
    int rc = open_chunks_locked({k, k}, plain.data(), &seen);
    if (rc < 0) return rc;
    std::memset(plain.data() + size_ % C, 0, C - size_ % C);
    rc = seal_and_write_locked({k, k}, plain.data(), std::min(new_size, (k + 1) * C), &seen);
    if (rc < 0) return rc;
    resealed = k;
  } else if (size_ == 0) {
    int rc = ensure_header_locked(true);
    if (rc < 0) return rc;
  }
  // Growing over an incomplete last chunk: cut it off first, so that the chunk growing in its
  // place is a hole (zeros) instead of its bytes followed by zeros (EIO). (A partial last chunk
  // was resealed above; a file with a fragment ends at a chunk boundary, so none was.)
  if (new_size > size_) {
    if (int rc = drop_fragment_locked(); rc < 0) return rc;
    // Format 2: a new last chunk shorter than kV2HoleMinBytes is a hole only with a zero entry,
    // and its entry slot may hold what an earlier, longer file or a torn append left there.
    const std::uint64_t last = (new_size - 1) / C;
    if (int rc = zero_short_hole_entry_locked(last, new_size, size_ == 0 || last > (size_ - 1) / C); rc < 0) return rc;
  }
  if (::ftruncate(fd(), static_cast<off_t>(layout_.base_offset() + layout_.cipher_size(new_size))) != 0) {
    const int err = -errno;
    // The filesystem refused the size (EFBIG past its limit, say): reseal the edge chunk at its
    // old length from the plaintext still in hand, so a failed truncate leaves the file as it was
    // instead of with a chunk whose length no longer matches the file size.
    if (resealed) {
      (void)seal_and_write_locked({*resealed, *resealed}, plain.data(), size_);
      (void)::ftruncate(fd(), static_cast<off_t>(layout_.base_offset() + layout_.cipher_size(size_)));
    }
    return err;
  }
  size_ = new_size;
  fragment_ = 0;
  if (durable_size_.load() > new_size) durable_size_.store(new_size);
  return 0;
}

int ContentFile::truncate(std::uint64_t new_size) {
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) {
    // A file whose size is impossible (damage, or a torn write nothing could put back) can still
    // be emptied: truncating to zero keeps none of its bytes, so nothing is lost by not reading
    // them, and the file becomes usable again (O_TRUNC, `: > file`).
    if (r != -EIO || new_size != 0) return r;
    if (::ftruncate(fd(), static_cast<off_t>(layout_.base_offset())) != 0) return -errno;
    std::lock_guard hl(header_mu_);
    header_.reset();
    header_ready_.store(false, std::memory_order_relaxed);
    size_ = 0;
    size_valid_ = true;
    fragment_ = 0;
    durable_size_.store(0);
    return 0;
  }
  return truncate_locked(new_size);
}

int ContentFile::extend_to(std::uint64_t new_size) {
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) return r;
  return new_size > size_ ? truncate_locked(new_size) : 0;
}

int ContentFile::allocate(std::uint64_t off, std::uint64_t len, bool keep_size) {
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) return r;
  // Whole chunks, the header too when the range starts at chunk 0: a write into the range seals
  // whole chunks, however few bytes it brings. The backing filesystem's reserved blocks read as
  // zeros, which is how a hole chunk reads.
  const ChunkRange r = layout_.chunks_for(off, len);
  std::uint64_t begin, end;
  if (layout_.aligned()) {
    // Format 2: from the metadata block of the first chunk's group to the last chunk's aligned
    // data block (an inline file's chunk too, should it grow out of block 0), in one range; it
    // may reserve some chunks before the first of its group, which then read as holes still.
    begin = layout_.meta_block_offset(layout_.group_of(r.first));
    end = layout_.data_offset(r.last, ~std::uint64_t{0}) + layout_.chunk_size();
  } else {
    begin = r.first == 0 ? layout_.base_offset() : layout_.disk_offset(r.first);
    end = layout_.disk_offset(r.last) + layout_.disk_chunk_size();
  }
  if (::fallocate(fd(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(begin), static_cast<off_t>(end - begin)) != 0) {
    const int err = errno;
    if (err == ENOSPC || err == EDQUOT) {
      // The backing filesystem may keep what it reserved before it ran out (ext4 does). Past the
      // file's end that would be space taken that no size shows: give it back.
      struct stat st {};
      if (::fstat(fd(), &st) == 0 && end > static_cast<std::uint64_t>(st.st_size)) {
        const std::uint64_t from = std::max<std::uint64_t>(begin, static_cast<std::uint64_t>(st.st_size));
        (void)::fallocate(fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from),
                          static_cast<off_t>(end - from));
      }
      log::warning(label_.str() + ": fallocate refused: disk full");
    }
    return -err;
  }
  // Grow only, under the same lock (FallocateRace: a WRITE may grow the file meanwhile).
  return !keep_size && off + len > size_ ? truncate_locked(off + len) : 0;
}

int ContentFile::punch_disk_range_locked(std::uint64_t disk_off, std::uint64_t disk_len) {
  if (::fallocate(fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(disk_off),
                  static_cast<off_t>(disk_len)) == 0)
    return 0;
  if (errno != EOPNOTSUPP) return -errno;
  // No hole punching here: zeros on disk read as a hole all the same, they just take space.
  const std::vector<std::uint8_t> zeros(std::min<std::uint64_t>(disk_len, layout_.disk_chunk_size()), 0);
  for (std::uint64_t done = 0; done < disk_len;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(zeros.size(), disk_len - done));
    ssize_t w = pwrite_full(fd(), zeros.data(), n, disk_off + done);
    if (w < 0) return static_cast<int>(w);
    done += n;
  }
  return 0;
}

int ContentFile::zero_short_hole_entry_locked(std::uint64_t chunk, std::uint64_t plain_size, bool is_new) {
  if (!layout_.aligned() || !is_new || layout_.chunk_plain_len(chunk, plain_size) >= kV2HoleMinBytes) return 0;
  // Beyond the end of the file the slot reads as zeros once the file is extended.
  struct stat st {};
  if (::fstat(fd(), &st) != 0) return -errno;
  if (layout_.nonce_offset(chunk) >= static_cast<std::uint64_t>(st.st_size)) return 0;
  const std::array<std::uint8_t, kChunkOverhead> zeros{};
  const ssize_t w = pwrite_full(fd(), zeros.data(), zeros.size(), layout_.nonce_offset(chunk));
  return w < 0 ? static_cast<int>(w) : 0;
}

int ContentFile::punch_hole(std::uint64_t off, std::uint64_t len) {
  std::unique_lock lk(size_mu_);
  if (int r = load_size_if_needed_locked(); r < 0) return r;
  if (off >= size_ || len == 0) return 0;
  const std::uint64_t end = std::min(size_, off + len);
  const std::uint64_t C = layout_.chunk_size();
  const ChunkRange r = layout_.chunks_for(off, end - off);
  auto& plain = scratch(engine_, 1, C);
  // Consecutive whole chunks are punched as one disk range: punched one by one, the filesystem
  // block that straddles each chunk boundary would stay allocated.
  std::uint64_t run_begin = 0, run_end = 0;
  auto flush = [&]() -> int {
    const int rc = run_end > run_begin ? punch_disk_range_locked(run_begin, run_end - run_begin) : 0;
    run_begin = run_end = 0;
    return rc;
  };
  for (std::uint64_t k = r.first; k <= r.last; ++k) {
    const std::uint64_t cs = k * C, ce = std::min(size_, cs + C);
    const std::uint64_t zs = std::max(off, cs), ze = std::min(end, ce);
    if (zs == cs && ze == ce) {
      // Whole chunk: all-zero bytes on disk read back as a hole (format 2: its ciphertext; the
      // entry stays behind and is ignored, but for a chunk shorter than kV2HoleMinBytes).
      if (int rc = zero_short_hole_entry_locked(k, size_, true); rc < 0) return rc;
      const std::uint64_t b = layout_.aligned() ? layout_.data_offset(k, size_) : layout_.disk_offset(k);
      if (b != run_end) {
        int rc = flush();
        if (rc < 0) return rc;
        run_begin = b;
      }
      run_end = b + (ce - cs) + (layout_.aligned() ? 0 : kChunkOverhead);
      continue;
    }
    int rc = flush();
    if (rc < 0) return rc;
    CipherSeen seen;
    rc = open_chunks_locked({k, k}, plain.data(), &seen);
    if (rc < 0) return rc;
    std::memset(plain.data() + (zs - cs), 0, ze - zs);
    rc = seal_and_write_locked({k, k}, plain.data(), size_, &seen);
    if (rc < 0) return rc;
  }
  return flush();
}

}  // namespace gcfs
