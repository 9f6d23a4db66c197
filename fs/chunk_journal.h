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
//
// CIPHERDIR may be writable by others, so the journal trusts nothing it reads back
// (docs/SECURITY.md, "The crash journal's trust"): the file is opened beneath a CIPHERDIR
// descriptor as a regular file only (never a FIFO, a link or a device: those are reported, and the
// mount goes on without a journal); at most kJournalMaxSlots slots are ever read, so a huge or
// sparse file costs nothing; a record counts only when its digest checks (journal_record.h); and
// its pre-images are read from the file one record at a time, when recovery needs them, so
// memory stays at one slot whatever the file holds.
#pragma once

#include <sys/types.h>

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
#include "fs/journal_record.h"
#include "fs/unique_fd.h"

namespace gcfs {

constexpr const char* kJournalFileName = "gpucryptfs.journal";
// A FUSE daemon runs at most 16 worker threads (mount/lifecycle/fuse_runner.h); each write takes at most
// two slots, so 64 never run out; if they do, writers wait for a slot.
constexpr unsigned kJournalDefaultSlots = 64;
// The most slots a journal file may hold: no writer uses more, so a file longer than this many
// slots is damage (reported; only these slots are read). This also caps the records kept and
// recovered at 64: a daemon never has more writes in flight than it has slots, so a record
// beyond them cannot have come from one.
constexpr unsigned kJournalMaxSlots = 64;

class JournalFileView;  // the journal file a record was read from (chunk_journal.cc)

// One valid record, as read back: its header fields; its pre-images stay in the journal file.
struct JournalRecord : JournalRecordHeader {
  unsigned slot = 0;
  std::array<std::uint8_t, kJournalDigestBytes> digest{};
  std::shared_ptr<const JournalFileView> file;

  // Reads the pre-images (payload_len bytes: the chunks' on-disk bytes before the write, back to
  // back) into *out, checking again that the slot still holds this very record (its digest,
  // over what is read now). 0; -EBADMSG when the slot changed since it was read; else -errno.
  int load_payload(std::vector<std::uint8_t>* out) const;
};

// What reading a journal found.
struct JournalScan {
  std::vector<JournalRecord> records;  // valid records, newest (highest sequence) first; at most kJournalMaxSlots
  // "" or what is wrong with the journal file itself, for a warning: not a regular file (a FIFO,
  // a symbolic link, a directory...), or larger than its slots allow.
  std::string damage;
  unsigned rejected = 0;  // records whose digest is wrong: torn by a kill, or not written with this vault's key
  unsigned legacy = 0;    // of the records, how many are version 2 (the previous release's)
};

class ChunkJournal {
 public:
  // Where the slot geometry comes from: the vault's chunk size.
  static std::uint64_t slot_payload_bytes(std::uint32_t chunk_size) { return journal_slot_payload_bytes(chunk_size); }
  static std::uint64_t slot_bytes(std::uint32_t chunk_size) { return kJournalHeaderBlock + slot_payload_bytes(chunk_size); }

  // Opens (creating it, mode 0600, sparse) CIPHERDIR/gpucryptfs.journal beneath cipherdir_fd for
  // writing and takes an exclusive flock on it, so two processes never share one journal. Only a
  // regular file with one name is opened: anything else there (a FIFO, a symbolic link, a
  // directory, a file with another hard link) is refused at once, never waited on. A file longer than kJournalMaxSlots slots is cut back to them (with
  // a warning: no writer puts anything there). cipherdir: CIPHERDIR's path, for messages and
  // path hints; keys: the vault's, for the records' HMAC; slots: at most kJournalMaxSlots.
  // Returns nullptr and sets *error when it cannot (another process holds the lock: *busy is set).
  static std::unique_ptr<ChunkJournal> open(int cipherdir_fd, const std::string& cipherdir, const KeyRing& keys,
                                            std::uint32_t chunk_size, unsigned slots, std::string* error,
                                            bool* busy = nullptr);
  ~ChunkJournal();
  ChunkJournal(const ChunkJournal&) = delete;
  ChunkJournal& operator=(const ChunkJournal&) = delete;

  // The valid records in CIPHERDIR/gpucryptfs.journal (beneath cipherdir_fd): those whose magic,
  // version, bounds and digest are right (journal_record.h), from the first kJournalMaxSlots
  // slots. A missing file has none and no damage; a journal that is not a regular file has none
  // and says why in damage. Never blocks, whatever lies there.
  static JournalScan scan(int cipherdir_fd, const KeyRing& keys, std::uint32_t chunk_size);
  // The same for the journal at path (CIPHERDIR/gpucryptfs.journal; the directory part is
  // CIPHERDIR itself, trusted as given), returning the records. Damage is put in *damage, or
  // logged as a warning when damage is null.
  static std::vector<JournalRecord> read_records(const std::string& path, std::uint32_t chunk_size, const KeyRing& keys,
                                                 std::string* damage = nullptr);
  // The records of this open journal's own file: what a mount recovers before it writes.
  JournalScan existing_records() const;

  // Zeros the magic of the records read from path (the slots they came from), and fsyncs. The
  // file must still be the one they were read from (else -ESTALE). 0 or -errno.
  static int invalidate_records(const std::string& path, std::uint32_t chunk_size,
                                const std::vector<JournalRecord>& records);
  // The same through this open journal (records from existing_records).
  int invalidate(const std::vector<JournalRecord>& records);

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
  ChunkJournal(UniqueFd fd, std::string path, std::string cipherdir, const JournalKey& key, std::uint32_t chunk_size,
               unsigned slots, std::uint64_t next_sequence);
  std::vector<unsigned> take_slots(std::size_t n, std::uint64_t* first_sequence);
  void give_back(std::vector<unsigned>& slots);

  UniqueFd fd_;
  std::string path_, cipherdir_;
  JournalKey key_;
  JournalMac mac_;  // key_, keyed once: a lane per slot, used by the slot's writer
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
