#include "fs/chunk_journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "fs/chunk_layout.h"
#include "fs/plain_io.h"
#include "fs/file_lock.h"
#include "fs/log.h"
#include "fs/safe_open.h"

namespace gcfs {

// The journal file that records were read from, shared by them: their pre-images are read from
// it when recovery needs them.
class JournalFileView {
 public:
  JournalFileView(UniqueFd fd, const JournalKey& key, std::uint32_t chunk_size, const struct stat& st)
      : fd(std::move(fd)), key(key), chunk_size(chunk_size), dev(st.st_dev), ino(st.st_ino) {}
  UniqueFd fd;
  JournalKey key;
  std::uint32_t chunk_size;
  dev_t dev;
  ino_t ino;
};

namespace {

std::uint64_t get64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

bool same_fields(const JournalRecordHeader& a, const JournalRecordHeader& b) {
  return a.version == b.version && a.sequence == b.sequence && a.file_id == b.file_id &&
         a.first_chunk == b.first_chunk && a.chunk_count == b.chunk_count && a.chunk_size == b.chunk_size &&
         a.base_offset == b.base_offset && a.old_cipher_size == b.old_cipher_size &&
         a.new_cipher_size == b.new_cipher_size && a.payload_len == b.payload_len && a.path == b.path;
}

std::string journal_label(const std::string& cipherdir) { return cipherdir + "/" + kJournalFileName; }

// The valid records of the journal open as fd (a regular file), reading at most
// kJournalMaxSlots slots: a file of any size, sparse or not, costs at most that many header
// reads and payload reads of one slot each.
JournalScan scan_file(UniqueFd fd, const JournalKey& key, std::uint32_t chunk_size, const std::string& label) {
  JournalScan out;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    out.damage = label + ": cannot stat: " + std::strerror(errno);
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    out.damage = label + " is a " + file_type_name(st.st_mode) + ", not a regular file";
    return out;
  }
  const std::uint64_t sb = ChunkJournal::slot_bytes(chunk_size);
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  if (size > kJournalMaxSlots * sb)
    out.damage = label + " holds " + std::to_string(size) + " bytes, more than its " + std::to_string(kJournalMaxSlots) +
                 " slots (" + std::to_string(kJournalMaxSlots * sb) + " bytes) can; only those slots are read";
  auto view = std::make_shared<JournalFileView>(std::move(fd), key, chunk_size, st);
  std::vector<std::uint8_t> block(kJournalHeaderBlock), payload;
  for (unsigned slot = 0; slot < kJournalMaxSlots; ++slot) {
    const std::uint64_t off = std::uint64_t{slot} * sb;
    if (off + kJournalHeaderBlock > size) break;
    if (pread_full(view->fd.get(), block.data(), block.size(), off) != static_cast<ssize_t>(block.size())) break;
    auto h = parse_journal_header(block.data(), chunk_size);
    if (!h) continue;  // invalidated, never used, or not a record this code reads
    // Bounded by parse_journal_header: at most one slot's payload room.
    payload.resize(h->payload_len);
    if (pread_full(view->fd.get(), payload.data(), payload.size(), off + kJournalHeaderBlock) !=
            static_cast<ssize_t>(payload.size()) ||
        !journal_digest_ok(block.data(), *h, payload.data(), key)) {
      ++out.rejected;  // torn (the daemon died while writing it), damaged or forged: ignored
      continue;
    }
    JournalRecord r;
    static_cast<JournalRecordHeader&>(r) = std::move(*h);
    r.slot = slot;
    std::copy(block.begin() + kJournalDigestOffset, block.begin() + kJournalDigestOffset + kJournalDigestBytes,
              r.digest.begin());
    r.file = view;
    if (r.legacy()) ++out.legacy;
    out.records.push_back(std::move(r));
  }
  std::sort(out.records.begin(), out.records.end(),
            [](const JournalRecord& a, const JournalRecord& b) { return a.sequence > b.sequence; });
  return out;
}

// Opens CIPHERDIR/gpucryptfs.journal beneath dirfd for reading, as a regular file only. nullopt
// when there is none (no records, no damage), or with *damage set when something else is there.
std::optional<UniqueFd> open_for_reading(int dirfd, const std::string& label, std::string* damage) {
  OpenResult o = open_beneath(dirfd, kJournalFileName, FileType::Regular, O_RDONLY);
  if (o) return std::move(o.fd);
  if (o.error != ENOENT) *damage = label + " " + o.why();
  return std::nullopt;
}

}  // namespace

int JournalRecord::load_payload(std::vector<std::uint8_t>* out) const {
  if (!file) return -EBADF;
  const int fd = file->fd.get();
  const std::uint64_t off = std::uint64_t{slot} * ChunkJournal::slot_bytes(file->chunk_size);
  std::vector<std::uint8_t> block(kJournalHeaderBlock);
  if (pread_full(fd, block.data(), block.size(), off) != static_cast<ssize_t>(block.size())) return -EBADMSG;
  auto h = parse_journal_header(block.data(), file->chunk_size);
  if (!h || !same_fields(*h, *this) ||
      !std::equal(digest.begin(), digest.end(), block.begin() + kJournalDigestOffset))
    return -EBADMSG;
  out->resize(payload_len);
  const ssize_t n = pread_full(fd, out->data(), out->size(), off + kJournalHeaderBlock);
  if (n < 0) return static_cast<int>(n);
  if (static_cast<std::uint64_t>(n) != payload_len || !journal_digest_ok(block.data(), *h, out->data(), file->key)) {
    out->clear();
    return -EBADMSG;
  }
  return 0;
}

ChunkJournal::ChunkJournal(UniqueFd fd, std::string path, std::string cipherdir, const JournalKey& key,
                           std::uint32_t chunk_size, unsigned slots, std::uint64_t next_sequence)
    : fd_(std::move(fd)),
      path_(std::move(path)),
      cipherdir_(std::move(cipherdir)),
      key_(key),
      mac_(key_, slots),
      chunk_size_(chunk_size),
      slot_bytes_(slot_bytes(chunk_size)),
      chunks_per_record_(journal_chunks_per_record(chunk_size)),
      slot_count_(slots),
      next_sequence_(next_sequence) {
  for (unsigned i = slots; i-- > 0;) free_.push_back(i);  // slot 0 on top
}

ChunkJournal::~ChunkJournal() {
  if (const int d = proc_fd_dir_.load(); d >= 0) ::close(d);
}

std::unique_ptr<ChunkJournal> ChunkJournal::open(int cipherdir_fd, const std::string& cipherdir, const KeyRing& keys,
                                                 std::uint32_t chunk_size, unsigned slots, std::string* error,
                                                 bool* busy) {
  if (busy) *busy = false;
  const std::string path = journal_label(cipherdir);
  if (slots == 0 || slots > kJournalMaxSlots) {
    *error = path + ": " + std::to_string(slots) + " slots asked for, at most " + std::to_string(kJournalMaxSlots);
    return nullptr;
  }
  // Beneath CIPHERDIR, a regular file only, never blocking: a FIFO, a symbolic link or a
  // directory in its place is refused at once.
  OpenResult o = open_beneath(cipherdir_fd, kJournalFileName, FileType::Regular, O_RDWR | O_CREAT, 0600);
  if (!o) {
    *error = path + " " + o.why();
    return nullptr;
  }
  UniqueFd fd = std::move(o.fd);
  if (const int e = flock_with_grace(fd.get(), LOCK_EX); e != 0) {
    if (busy) *busy = e == EWOULDBLOCK;
    *error = path + (e == EWOULDBLOCK ? ": in use by another gpucryptfs process (is the vault mounted twice?)"
                                      : std::string(": cannot lock: ") + std::strerror(e));
    return nullptr;
  }
  // Not sized up front: records extend the file as slots are first used, and the lowest free slot
  // is taken first, so the file stays as large as the most writes ever in flight at once needed
  // (about a slot per request worker at worst), not 64 slots' worth. Copy and sync tools that do
  // not keep files sparse see that size.
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    *error = "cannot stat " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  // The journal is written to (and may be cut back): a second name for it could be any file
  // outside CIPHERDIR on the same filesystem that someone with write access to CIPHERDIR could
  // link (where protected_hardlinks is off, even one they cannot write). A journal has one name.
  if (st.st_nlink != 1) {
    *error = path + " has " + std::to_string(st.st_nlink) +
             " hard links (a crash journal has one; another name for it may be a file outside CIPHERDIR)";
    return nullptr;
  }
  const std::uint64_t sb = slot_bytes(chunk_size), max_bytes = kJournalMaxSlots * sb;
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    // Nothing this code writes lies there, and nothing reads it: cut it off, so that it costs
    // neither room nor a warning at every mount.
    log::warning("crash journal: " + path + " held " + std::to_string(st.st_size) + " bytes, more than its " +
                 std::to_string(kJournalMaxSlots) + " slots can; cut back to " + std::to_string(max_bytes) +
                 " bytes (nothing beyond them is ever a record)");
    if (::ftruncate(fd.get(), static_cast<off_t>(max_bytes)) == 0) st.st_size = static_cast<off_t>(max_bytes);
  }
  // Sequence numbers keep rising across mounts: start above every number still in the file,
  // invalidated records included (invalidation zeros only the magic). Only the first slots
  // are looked at, and a number no writer reaches is skipped, so a forged one cannot wrap the
  // counter.
  std::uint64_t max_seq = 0;
  std::array<std::uint8_t, kJournalRecordHeaderBytes> h{};
  for (unsigned slot = 0; slot < kJournalMaxSlots; ++slot) {
    const std::uint64_t off = std::uint64_t{slot} * sb;
    if (off + kJournalRecordHeaderBytes > static_cast<std::uint64_t>(st.st_size)) break;
    if (pread_full(fd.get(), h.data(), h.size(), off) != static_cast<ssize_t>(h.size())) break;
    if (const std::uint64_t seq = get64(h.data() + 16); seq < kJournalMaxSequence) max_seq = std::max(max_seq, seq);
  }
  return std::unique_ptr<ChunkJournal>(
      new ChunkJournal(std::move(fd), path, cipherdir, keys.journal_key(), chunk_size, slots, max_seq + 1));
}

JournalScan ChunkJournal::scan(int cipherdir_fd, const KeyRing& keys, std::uint32_t chunk_size) {
  // The label is only for messages: the file itself is reached through cipherdir_fd.
  const std::string label = std::string("CIPHERDIR/") + kJournalFileName;
  JournalScan out;
  auto fd = open_for_reading(cipherdir_fd, label, &out.damage);
  if (!fd) return out;
  return scan_file(std::move(*fd), keys.journal_key(), chunk_size, label);
}

std::vector<JournalRecord> ChunkJournal::read_records(const std::string& path, std::uint32_t chunk_size,
                                                      const KeyRing& keys, std::string* damage) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  JournalScan s;
  UniqueFd dirfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dirfd) {
    s.damage = "cannot open " + dir + ": " + std::strerror(errno);
  } else if (slash == std::string::npos || path.substr(slash + 1) != kJournalFileName) {
    s.damage = path + " is not a crash journal's name";
  } else {
    auto fd = open_for_reading(dirfd.get(), path, &s.damage);
    if (fd) s = scan_file(std::move(*fd), keys.journal_key(), chunk_size, path);
  }
  if (!s.damage.empty()) {
    if (damage)
      *damage = s.damage;
    else
      log::warning("crash journal: " + s.damage);
  }
  return std::move(s.records);
}

JournalScan ChunkJournal::existing_records() const {
  JournalScan out;
  UniqueFd dup(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (!dup) {
    out.damage = path_ + ": " + std::strerror(errno);
    return out;
  }
  return scan_file(std::move(dup), key_, chunk_size_, path_);
}

namespace {

int zero_magics(int fd, std::uint32_t chunk_size, const std::vector<JournalRecord>& records) {
  const std::array<std::uint8_t, 8> zeros{};
  int rc = 0;
  for (const auto& r : records) {
    ssize_t w = pwrite_full(fd, zeros.data(), zeros.size(), std::uint64_t{r.slot} * ChunkJournal::slot_bytes(chunk_size));
    if (w < 0) rc = static_cast<int>(w);
  }
  // Recovery has fsynced what it restored; the invalidation is made durable too, so that a power
  // loss right after cannot bring back records that recovery already dealt with.
  if (rc == 0 && ::fsync(fd) != 0) rc = -errno;
  return rc;
}

}  // namespace

int ChunkJournal::invalidate_records(const std::string& path, std::uint32_t chunk_size,
                                     const std::vector<JournalRecord>& records) {
  if (records.empty()) return 0;
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return -EINVAL;
  UniqueFd dirfd(::open(slash == 0 ? "/" : path.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dirfd) return -errno;
  OpenResult o = open_beneath(dirfd.get(), path.substr(slash + 1), FileType::Regular, O_WRONLY);
  if (!o) return -o.error;
  // Only the very file the records came from: zeros in another file's bytes are not harmless.
  struct stat st {};
  if (::fstat(o.fd.get(), &st) != 0) return -errno;
  for (const auto& r : records)
    if (!r.file || r.file->dev != st.st_dev || r.file->ino != st.st_ino) return -ESTALE;
  return zero_magics(o.fd.get(), chunk_size, records);
}

int ChunkJournal::invalidate(const std::vector<JournalRecord>& records) {
  if (records.empty()) return 0;
  return zero_magics(fd_.get(), chunk_size_, records);
}

ChunkJournal::Pending& ChunkJournal::Pending::operator=(Pending&& o) noexcept {
  if (this != &o) {
    release();
    journal_ = o.journal_;
    slots_ = std::move(o.slots_);
    o.journal_ = nullptr;
  }
  return *this;
}

void ChunkJournal::Pending::release() {
  if (!journal_) return;
  journal_->give_back(slots_);
  journal_ = nullptr;
}

std::vector<unsigned> ChunkJournal::take_slots(std::size_t n, std::uint64_t* first_sequence) {
  // The slots and their sequence numbers under one lock: every protected write comes here.
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return free_.size() >= n; });
  std::vector<unsigned> got(free_.end() - static_cast<std::ptrdiff_t>(n), free_.end());
  free_.resize(free_.size() - n);
  *first_sequence = next_sequence_;
  next_sequence_ += n;
  return got;
}

void ChunkJournal::give_back(std::vector<unsigned>& slots) {
  // Invalidate first: a slot on the free list never holds a valid record. A small pwrite over
  // the magic, no fsync (see the header comment).
  const std::array<std::uint8_t, 8> zeros{};
  for (unsigned s : slots) (void)pwrite_full(fd_.get(), zeros.data(), zeros.size(), std::uint64_t{s} * slot_bytes_);
  {
    std::lock_guard lk(mu_);
    for (unsigned s : slots) free_.push_back(s);
  }
  slots.clear();
  cv_.notify_all();
}

unsigned ChunkJournal::slots_in_use() const {
  std::lock_guard lk(mu_);
  return slot_count_ - static_cast<unsigned>(free_.size());
}

int ChunkJournal::proc_fd_dir() const {
  const pid_t me = ::getpid();
  if (proc_pid_.load(std::memory_order_acquire) == me) return proc_fd_dir_.load(std::memory_order_relaxed);
  std::lock_guard lk(proc_mu_);
  if (proc_pid_.load(std::memory_order_relaxed) != me) {
    // Never opened, or opened by the parent before a fork (then it lists the parent's descriptors).
    const int old = proc_fd_dir_.exchange(::open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (old >= 0) ::close(old);
    proc_pid_.store(me, std::memory_order_release);
  }
  return proc_fd_dir_.load(std::memory_order_relaxed);
}

std::string ChunkJournal::hint_for_fd(int fd) const {
  char buf[4096];
  const int dir = proc_fd_dir();
  const std::string name = std::to_string(fd);
  ssize_t n = dir >= 0 ? ::readlinkat(dir, name.c_str(), buf, sizeof buf)
                       : ::readlink(("/proc/self/fd/" + name).c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof buf) return {};
  std::string p(buf, static_cast<std::size_t>(n));
  const std::string prefix = cipherdir_ + "/";
  if (!p.starts_with(prefix) || p.ends_with(" (deleted)")) return {};
  p.erase(0, prefix.size());
  return p.size() <= kJournalMaxPathBytes ? p : std::string();
}

int ChunkJournal::record(const FileId& id, std::uint64_t first_chunk, std::uint32_t count, std::uint64_t base_offset,
                         std::uint64_t old_cipher_size, std::uint64_t new_cipher_size, const std::string& path_hint,
                         const std::uint8_t* payload, std::size_t len, Pending* out) {
  const std::uint64_t D = std::uint64_t{chunk_size_} + kChunkOverhead;
  const std::size_t nrec = (count + chunks_per_record_ - 1) / chunks_per_record_;
  if (count == 0 || nrec > slot_count_) return -E2BIG;
  // The same bounds the reader keeps (journal_record.h): a record it would ignore protects nothing.
  if (len > std::uint64_t{count} * D || len <= std::uint64_t{count - 1} * D + kChunkOverhead) return -EINVAL;
  const std::string& hint = path_hint.size() <= kJournalMaxPathBytes ? path_hint : std::string();
  Pending p;
  p.journal_ = this;
  std::uint64_t seq;
  p.slots_ = take_slots(nrec, &seq);
  // encode_journal_header fills the whole block; one per thread, not an allocation per record.
  thread_local std::vector<std::uint8_t> header(kJournalHeaderBlock);
  for (std::size_t i = 0; i < nrec; ++i) {
    const std::uint32_t c0 = static_cast<std::uint32_t>(i) * chunks_per_record_;
    const std::uint32_t n = std::min<std::uint32_t>(chunks_per_record_, count - c0);
    const std::uint64_t pay_off = c0 * D;
    JournalRecordHeader h;
    h.sequence = seq + i;
    h.file_id = id;
    h.first_chunk = first_chunk + c0;
    h.chunk_count = n;
    h.chunk_size = chunk_size_;
    h.base_offset = base_offset;
    h.old_cipher_size = old_cipher_size;
    h.new_cipher_size = new_cipher_size;
    h.payload_len = std::min<std::uint64_t>(len - pay_off, std::uint64_t{n} * D);
    h.path = hint;
    try {
      encode_journal_header(h, payload + pay_off, mac_, p.slots_[i], header.data());
    } catch (const std::invalid_argument&) {
      p.release();
      return -EINVAL;  // a chunk index past what a file can hold
    }
    // Header page and payload in one pwritev. A record torn by the kill fails its HMAC and is
    // ignored; the chunks it describes were not touched yet.
    const std::uint64_t slot_off = std::uint64_t{p.slots_[i]} * slot_bytes_;
    ssize_t w = pwrite2_full(fd_.get(), header.data(), kJournalHeaderBlock, payload + pay_off, h.payload_len, slot_off);
    if (w < 0) {
      p.release();  // zeros over whatever magic landed
      return static_cast<int>(w);
    }
  }
  *out = std::move(p);
  return 0;
}

}  // namespace gcfs
