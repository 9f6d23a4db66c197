// The plaintext view of one ciphertext file: reads, writes, truncation and hole punching in
// plaintext offsets, mapped onto sealed chunks. Every request hands all the chunks it touches to
// the engine as one batch; partial chunks at the edges are read, modified and sealed again with a
// fresh nonce.
//
// One ContentFile exists per open inode and is shared by all its handles: it holds the locks that
// keep concurrent requests on one file from corrupting a chunk, and the cached plaintext size.
// Operations return a byte count or a negative errno, and log the reason for every EIO.
//
// What differs between format versions (where a chunk's bytes lie, how a run of them is read,
// sealed and written) is the vault's ContentFormat's (content_format.h), picked once with the
// layout; this class keeps what every format shares. Its code is split by job: content_file.cc
// (sizes and the object), content_header.cc, content_read.cc, content_write.cc,
// content_resize.cc (truncate, fallocate, punch), content_protect.cc (the crash journal) and
// direct_io.cc (the O_DIRECT descriptors).
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"
#include "crypto/key_ring.h"
#include "fs/backing_io.h"
#include "fs/chunk_journal.h"
#include "fs/chunk_layout.h"
#include "fs/content/content_format.h"
#include "fs/file_header.h"
#include "fs/file_label.h"
#include "fs/range_lock.h"

namespace gcfs {

class ContentFile {
 public:
  // fd: the ciphertext file, open for reading (and for writing, for the calls that write); not
  // owned. label: how the log names this file (its ciphertext path), made when a message needs it.
  // journal: where rewrites of chunks that may hold durable data write their pre-images first
  // (chunk_journal.h); null leaves rewrites unprotected against the daemon dying (volumes).
  // io: whether chunk data goes through O_DIRECT (format 2 only; backing_io.h); null: buffered.
  ContentFile(int fd, const ChunkLayout& layout, ChunkEngine& engine, const KeyRing& keys, FileLabel label,
              ChunkJournal* journal = nullptr, BackingIo* io = nullptr);
  ~ContentFile();
  ContentFile(const ContentFile&) = delete;
  ContentFile& operator=(const ContentFile&) = delete;

  // Re-reads the ciphertext size; call after the file was changed other than through this object.
  // Returns -EIO (logged) for an impossible size.
  int reload();
  // The file was made just now (O_CREAT | O_EXCL) and is empty: its size is known without an
  // fstat, and its first write gives it a fresh header without reading one first. Call before
  // any other use.
  void assume_new_empty();
  // Swaps in another descriptor for the same file (a reopen with more access rights).
  void set_fd(int fd);
  int fd() const { return fd_.load(); }

  // Negative errno on failure. -EIO if the file's size or header is corrupt.
  std::int64_t plain_size();

  // Up to len bytes at off; short only at end of file. -EIO if any chunk touched fails
  // authentication (the log names the file and chunk); other chunks stay readable.
  ssize_t read(std::uint64_t off, std::size_t len, std::uint8_t* out);
  // The same without the copy: *data points into this thread's scratch buffer, valid until the
  // thread's next call into any ContentFile (the FUSE daemon replies from it at once).
  ssize_t read_view(std::uint64_t off, std::size_t len, const std::uint8_t** data);
  // The same, decrypting straight into `room` (room_bytes long) where the chunks fit there whole
  // from its start (off on a chunk boundary): *data is then room. A FUSE reply buffer that the
  // kernel reads from (an io_uring entry's payload) gets a READ's plaintext with no copy.
  ssize_t read_view(std::uint64_t off, std::size_t len, const std::uint8_t** data, std::uint8_t* room,
                    std::size_t room_bytes);
  // Sizes this thread's scratch buffers for requests of up to max_request bytes, so that a worker
  // thread allocates (and, with the gpu engine, pins) each once, at its first content request.
  static void prepare_thread(const ChunkLayout& layout, std::size_t max_request);
  // Writes len bytes at off, filling any gap before off with a hole. Returns len or -errno; on
  // ENOSPC and other write errors the file's earlier contents are left intact.
  ssize_t write(std::uint64_t off, const std::uint8_t* in, std::size_t len);
  // Writes len bytes at the end of the file, wherever the end is when the write runs: finding the
  // end and writing there happen under one lock, so a concurrent write that grows the file is
  // never overwritten (O_APPEND). *at (optional) receives the offset written at.
  ssize_t append(const std::uint8_t* in, std::size_t len, std::uint64_t* at = nullptr);
  // Sets the size exactly, shrinking or growing (ftruncate).
  int truncate(std::uint64_t size);
  // Grows the file to size if it is shorter; never shrinks it (fallocate without KEEP_SIZE). The
  // size is compared and changed under one lock: with the kernel's writeback cache a WRITE may
  // grow the file at any moment, and a size read before it must never cut that write off.
  int extend_to(std::uint64_t size);
  // fallocate: reserves the backing space that the chunks of [off, off+len) take once written
  // (nonces and tags included), or fails with -ENOSPC (-EOPNOTSUPP where the backing filesystem
  // cannot reserve) before anything changes; then grows the size to off+len unless keep_size.
  // Reserved chunks read as holes (zeros) until written, and writing them takes no new space.
  int allocate(std::uint64_t off, std::uint64_t len, bool keep_size);
  // Makes [off, off+len) read as zeros without changing the size; whole chunks become holes that
  // take no space on disk.
  int punch_hole(std::uint64_t off, std::uint64_t len);

  // Call after fsync/fdatasync of the file succeeded: everything up to the current size is now
  // durable, so a later rewrite of those chunks journals their pre-image first.
  void mark_durable();
  // The plaintext size below which chunks count as durable (tests).
  std::uint64_t durable_size() const { return durable_size_.load(); }

 private:
  // The format implementations work on the file's state under its locks.
  friend class ContentFormatV1;
  friend class ContentFormatV2;

  int load_size_locked();
  // Makes header_ and key_ known: read from the file, or, with create and an empty file, a fresh
  // one written there. read_header: the header's kFileHeaderBytes when the caller read them
  // along with chunk data just now (the read of the first chunks brings them: one backing call
  // instead of two); they are checked as a header read here is.
  // to_write (optional, with create): where a fresh header goes instead of being written here,
  // for the caller to write in one call with chunk 0 (a new file's first write is then one
  // backing call, as a small file's first read is); the caller must call forget_header_locked
  // if that write fails. Left empty when the file has its header already.
  int ensure_header_locked(bool create, const std::uint8_t* read_header = nullptr,
                           std::optional<std::array<std::uint8_t, kFileHeaderBytes>>* to_write = nullptr);
  // After a failed write of a header that ensure_header_locked handed out: the next write makes
  // a fresh one (under size_mu_ held exclusively, as every write to an empty file is).
  void forget_header_locked();
  bool header_known() const { return header_ready_.load(std::memory_order_acquire); }
  // Opens chunks [first, last] of the current size into out (chunk-aligned, count * C bytes);
  // *seen (optional) says where their ciphertext lies until the next open_chunks_locked.
  // out_room: the bytes out has (0: unknown). Format 2 then reads the ciphertext into out itself
  // and opens it in place, when seen is not asked for and out has room for O_DIRECT's rounding.
  int open_chunks_locked(ChunkRange r, std::uint8_t* out, CipherSeen* seen = nullptr, std::size_t out_room = 0) {
    return format_.open_chunks(*this, r, out, seen, out_room);
  }
  // Seals plain (chunk-aligned, lens from new_size) for chunks r and writes them in one pwrite.
  // seen: the on-disk bytes of r, when the caller just read them under the same locks.
  int seal_and_write_locked(ChunkRange r, const std::uint8_t* plain, std::uint64_t new_size,
                            const CipherSeen* seen = nullptr);
  // The same with each chunk's plaintext where it lies (plains[i] for chunk r.first + i): a write
  // seals the chunks it covers whole straight from the caller's buffer.
  int seal_and_write_locked(ChunkRange r, const std::uint8_t* const* plains, std::uint64_t new_size,
                            const CipherSeen* seen = nullptr) {
    return format_.seal_and_write(*this, r, plains, new_size, seen);
  }
  ssize_t write_locked(std::uint64_t off, const std::uint8_t* in, std::size_t len);
  // A write that may change the size, under size_mu_ held exclusively.
  ssize_t write_growing_locked(std::uint64_t off, const std::uint8_t* in, std::size_t len);
  int load_size_if_needed_locked();
  int truncate_locked(std::uint64_t size);
  // Truncation to 0, made durable first when may_hold_durable (content_resize.cc says why).
  int empty_locked(bool may_hold_durable);
  // Cuts an incomplete last chunk off the ciphertext (fragment_), leaving the whole chunks.
  int drop_fragment_locked();
  // Makes a disk range read as zeros, by punching it or, where that is unsupported, writing zeros.
  int punch_disk_range_locked(std::uint64_t disk_off, std::uint64_t disk_len);
  int corrupt(const std::string& what);
  // Seals chunks r.first..r.last of plaintexts plains[i] into out + i * stride, each with a fresh
  // nonce; the ops (nonces, tags, lengths) are the calling thread's until its next call.
  std::vector<ChunkOp>& seal_chunks_locked(ChunkRange r, const std::uint8_t* const* plains, std::uint64_t new_size,
                                           std::uint8_t* out, std::size_t stride);
  // The same ops, not sealed yet.
  std::vector<ChunkOp>& chunk_ops_locked(ChunkRange r, const std::uint8_t* const* plains, std::uint64_t new_size,
                                         std::uint8_t* out, std::size_t stride);
  // Appends the open of chunk K to OPS (its AAD to AADS, which the caller reserved so that the
  // pointers stay put): NONCE and TAG point at the on-disk nonce and tag, IN at the ciphertext.
  void add_open_op(std::vector<ChunkOp>& ops, std::vector<std::array<std::uint8_t, kChunkAadBytes>>& aads,
                   std::uint64_t k, const std::uint8_t* nonce, const std::uint8_t* in, std::uint8_t* out,
                   std::size_t len, const std::uint8_t* tag);
  // Opens the chunks of OPS (whose outputs lie in OUT, chunk FIRST_CHUNK at OUT) and logs each
  // that fails authentication; -EIO if any did.
  int open_and_report(std::vector<ChunkOp>& ops, std::uint64_t first_chunk, const std::uint8_t* out);
  // Chunk data to and from the backing file: with O_DIRECT for the whole blocks when the vault
  // uses it and offset and memory are aligned, else (and for a last partial block) buffered.
  ssize_t pread_data(std::uint8_t* buf, std::size_t len, std::size_t room, std::uint64_t off);
  // The O_DIRECT descriptor that pread_data reads these bytes through; -1: it reads them buffered.
  int direct_fd_for_read(const std::uint8_t* buf, std::size_t len, std::size_t room, std::uint64_t off);
  ssize_t pwrite_data(const std::uint8_t* buf, std::size_t len, std::uint64_t off);
  // The O_DIRECT descriptor of this file, opened on first use; -1 when there is none.
  int direct_fd();
  // The same for a transfer of `bytes`: opened only for one of at least kDirectOpenMinBytes; a
  // smaller one uses it when it is open already, and goes buffered otherwise.
  static constexpr std::size_t kDirectOpenMinBytes = 16384;
  int direct_fd_for(std::size_t bytes);
  // Journals the pre-image of the chunks of r that may hold durable data (a contiguous run at the
  // start of r) before seal_and_write_locked overwrites them. 0, or -errno from reading them;
  // a journal that cannot take the record leaves the write unprotected (logged).
  int protect_locked(ChunkRange r, std::uint64_t new_cipher, const CipherSeen* seen, ChunkJournal::Pending* pending,
                     const std::uint8_t** pre_image, std::size_t* pre_len, std::uint64_t* pre_first);

  // The journal's path hint for this file, as of the journal's names_epoch() hint_epoch_: read
  // once per rename rather than once per rewrite (readlink of /proc/self/fd/N was the largest
  // single cost of a small rewrite after the crypto). An unlinked file keeps its last path: a
  // recovery that finds another file there skips the record by its file ID.
  std::string path_hint();
  std::shared_mutex hint_mu_;
  std::string hint_;
  std::uint64_t hint_epoch_ = ~std::uint64_t{0};

  std::atomic<int> fd_;
  BackingIo* io_;
  // -2: not opened yet (or fd_ changed since); -1: none. Descriptors are closed with the object
  // only, since a request may still be using one when set_fd replaces it.
  std::atomic<int> direct_fd_{-2};
  std::mutex direct_mu_;
  std::vector<int> direct_fds_;
  const ChunkLayout& layout_;
  const ContentFormat& format_;  // layout_.content(): picked once, with the vault's layout
  ChunkEngine& engine_;
  const KeyRing& keys_;
  FileLabel label_;
  ChunkJournal* journal_;

  // Shared by requests that stay inside the current size; exclusive for those that change it.
  std::shared_mutex size_mu_;
  RangeLock chunk_locks_;
  std::uint64_t size_ = 0;
  bool size_valid_ = false;
  // Bytes of an incomplete last chunk past the whole chunks at load (docs/FORMAT.md "Sizes"):
  // they are not part of size_, and must be gone before the file grows over them, or the chunk
  // that grows there would start with them and fail authentication instead of reading as zeros.
  std::uint64_t fragment_ = 0;
  // Plaintext bytes that someone may rely on: the size at load (all that existed when the file
  // was opened), raised to the size by mark_durable(), lowered by truncation. Chunks below it
  // are journaled before an in-place rewrite; chunks written only since the last fsync are not.
  std::atomic<std::uint64_t> durable_size_{0};

  std::mutex header_mu_;
  std::optional<FileHeader> header_;
  ChunkKey key_;
  // header_ and key_ are set: ensure_header_locked's fast path, with no lock.
  std::atomic<bool> header_ready_{false};
};

}  // namespace gcfs
