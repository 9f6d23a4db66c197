// The crash journal of a directory vault: CIPHERDIR/gpucryptfs.journal, an undo log of chunk
// pre-images (docs/FORMAT.md, "Crash journal").
//
// A chunk is rewritten in place. Before ContentFile overwrites chunks that may hold durable data,
// it writes a RECORD holding their current on-disk ciphertext (the pre-image) into a slot of this
// file, then does the in-place pwrite, then invalidates the record (zeros over its magic). So at
// any moment only the records of writes in flight are valid, and after the daemon dies
// (SIGKILL, a crash) the valid records are exactly the pre-images of the rewrites it may have
// torn; journal_recovery.h puts back those that are needed.
//
// No fsync on this path, on purpose: a dead process leaves the kernel's page cache intact, and a
// pwrite that returned is in the page cache, so the order of completed pwrites (record, data,
// invalidation) is all the daemon-death case needs. What this does NOT cover is power loss: the
// backing filesystem may then write the pages back in any order (docs/SECURITY.md).
//
// The file is a row of fixed-size slots, each holding at most one record; every write in flight
// takes its own slots from a free list, so records never need a lock on the file. A run of
// chunks longer than one slot holds is split over several slots (several records).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <vector>

#include "crypto/key_ring.h"

namespace gcfs {

constexpr const char* kJournalFileName = "gpucryptfs.journal";
constexpr std::uint16_t kJournalRecordVersion = 2;  // 1: the checksum covered the whole payload
// Every slot starts with one page holding the record header and the path hint; the payload (the
// pre-images) follows at this offset in the slot.
constexpr std::uint64_t kJournalHeaderBlock = 4096;
constexpr std::uint64_t kJournalRecordHeaderBytes = 120;  // before the path hint
constexpr std::uint64_t kJournalMaxPathBytes = kJournalHeaderBlock - kJournalRecordHeaderBytes;
// The payload room of a slot: 1 MiB (the largest FUSE write), or one chunk where chunks are larger.
constexpr std::uint64_t kJournalRunBytes = 1u << 20;
// A FUSE daemon runs at most 16 worker threads (mount/fuse_runner.h); each write takes at most
// two slots, so 64 never run out; if they do, writers wait for a slot.
constexpr unsigned kJournalDefaultSlots = 64;

// One valid record, as read back.
struct JournalRecord {
  unsigned slot = 0;
  std::uint64_t sequence = 0;
  FileId file_id{};
  std::uint64_t first_chunk = 0;
  std::uint32_t chunk_count = 0;
  std::uint32_t chunk_size = 0;        // the vault's plaintext chunk size C
  std::uint64_t base_offset = 0;       // where the content stream starts in the file (0 in a directory vault)
  std::uint64_t old_cipher_size = 0;   // the file's ciphertext size before the write
  std::uint64_t new_cipher_size = 0;   // and after it (before any truncation that followed)
  std::string path;                    // hint: the file's ciphertext path relative to CIPHERDIR; may be empty
  std::vector<std::uint8_t> payload;   // the chunks' on-disk bytes before the write, back to back
};

class ChunkJournal {
 public:
  // Where the slot geometry comes from: the vault's chunk size.
  static std::uint64_t slot_payload_bytes(std::uint32_t chunk_size);
  static std::uint64_t slot_bytes(std::uint32_t chunk_size) { return kJournalHeaderBlock + slot_payload_bytes(chunk_size); }

  // Opens (creating it, mode 0600, sparse) the journal at path for writing and takes an
  // exclusive flock on it, so two processes never share one journal. cipherdir: the prefix that
  // path hints are made relative to. Returns nullptr and sets *error when it cannot (another
  // process holds the lock: *busy is set).
  static std::unique_ptr<ChunkJournal> open(const std::string& path, const std::string& cipherdir,
                                            std::uint32_t chunk_size, unsigned slots, std::string* error,
                                            bool* busy = nullptr);
  ~ChunkJournal();
  ChunkJournal(const ChunkJournal&) = delete;
  ChunkJournal& operator=(const ChunkJournal&) = delete;

  // Every valid record (magic, version, lengths and SHA-256 checksum all right) in the journal
  // file at path, newest (highest sequence) first. A missing file has none. Torn or invalidated
  // records are skipped silently.
  static std::vector<JournalRecord> read_records(const std::string& path, std::uint32_t chunk_size);
  // Zeros the magic of the records read from path (the slots they came from). 0 or -errno.
  static int invalidate_records(const std::string& path, std::uint32_t chunk_size,
                                const std::vector<JournalRecord>& records);

  // The slots one protected write holds until its in-place pwrite is done. Destroying it
  // invalidates its records and gives the slots back.
  class Pending {
   public:
    Pending() = default;
    Pending(Pending&& o) noexcept : journal_(o.journal_), slots_(std::move(o.slots_)) { o.journal_ = nullptr; }
    Pending& operator=(Pending&& o) noexcept;
    ~Pending() { release(); }
    bool active() const { return journal_ != nullptr; }
    // Invalidates the records now and frees the slots.
    void release();

   private:
    friend class ChunkJournal;
    ChunkJournal* journal_ = nullptr;
    std::vector<unsigned> slots_;
  };

  // Journals the pre-image of chunks [first_chunk, first_chunk + count) of one file: payload is
  // their on-disk bytes back to back (every chunk disk_chunk_size bytes but the last, which may
  // be shorter). Splits the run over as many slots as it needs, waiting for free slots. On
  // success *out holds the slots until the caller's pwrite is done. 0 or -errno (then nothing is
  // held and the write is not protected).
  int record(const FileId& id, std::uint64_t first_chunk, std::uint32_t count, std::uint64_t base_offset,
             std::uint64_t old_cipher_size, std::uint64_t new_cipher_size, const std::string& path_hint,
             const std::uint8_t* payload, std::size_t len, Pending* out);

  // The path hint for an open file: its /proc/self/fd link, relative to CIPHERDIR; "" when the
  // file is not under CIPHERDIR (or is deleted).
  std::string hint_for_fd(int fd) const;
  // Names under CIPHERDIR moved (a rename of a file or of a directory above files): hints that
  // ContentFile keeps between writes must be read again. Called after the rename is done.
  void names_changed() { names_epoch_.fetch_add(1, std::memory_order_acq_rel); }
  std::uint64_t names_epoch() const { return names_epoch_.load(std::memory_order_acquire); }

  const std::string& path() const { return path_; }
  unsigned slot_count() const { return slot_count_; }
  std::uint32_t chunks_per_record() const { return chunks_per_record_; }
  // How many slots are taken right now (tests).
  unsigned slots_in_use() const;

 private:
  ChunkJournal(int fd, std::string path, std::string cipherdir, std::uint32_t chunk_size, unsigned slots,
               std::uint64_t next_sequence);
  std::vector<unsigned> take_slots(std::size_t n);
  void give_back(std::vector<unsigned>& slots);

  int fd_;
  std::string path_, cipherdir_;
  std::uint32_t chunk_size_;
  std::uint64_t slot_bytes_;
  std::uint32_t chunks_per_record_;
  unsigned slot_count_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<unsigned> free_;  // a stack: the same few slots (and their blocks) are reused
  std::uint64_t next_sequence_;

  // This process's /proc/self/fd, open: hint_for_fd reads a link in it by its bare number, which
  // costs a fraction of resolving the whole /proc/self/fd/N path on every rewrite. Opened on
  // first use by the process that uses it (a daemon forks after opening the journal).
  int proc_fd_dir() const;
  mutable std::mutex proc_mu_;  // for opening it; using it needs only the two atomics
  mutable std::atomic<int> proc_fd_dir_{-1};
  mutable std::atomic<pid_t> proc_pid_{0};
  std::atomic<std::uint64_t> names_epoch_{0};
};

}  // namespace gcfs
