#include "fs/chunk_journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "fs/chunk_layout.h"
#include "fs/content_file.h"
#include "fs/file_lock.h"

namespace gcfs {
namespace {

constexpr std::array<std::uint8_t, 8> kMagic = {'G', 'C', 'F', 'S', 'J', 'R', 'N', 'L'};
constexpr std::size_t kChecksumOffset = 88;  // the header's fields before it are covered

void put16(std::uint8_t* p, std::uint16_t v) { p[0] = static_cast<std::uint8_t>(v >> 8), p[1] = static_cast<std::uint8_t>(v); }
void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
void put64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
}
std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
std::uint32_t get32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | p[i];
  return v;
}
std::uint64_t get64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

// SHA-256 over the header's first 88 bytes, the path hint, and each payload chunk's nonce and
// tag. Not over the chunks' ciphertext: hashing 64 KiB per chunk doubled the cost of a small
// rewrite, and the ciphertext needs no checksum, since recovery only writes back a pre-image that
// passes AES-GCM authentication. The nonces and tags still tell a record whose payload the kill
// cut short, or that an older record in the same slot left behind, from the one written.
std::array<std::uint8_t, 32> checksum(const std::uint8_t* header, const std::uint8_t* path, std::size_t path_len,
                                      const std::uint8_t* payload, std::size_t payload_len, std::uint64_t disk_chunk) {
  std::array<std::uint8_t, 32> d{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned len = 0;
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx, header, kChecksumOffset) == 1 && EVP_DigestUpdate(ctx, path, path_len) == 1;
  for (std::uint64_t start = 0; ok && start < payload_len; start += disk_chunk) {
    const std::uint64_t end = std::min<std::uint64_t>(start + disk_chunk, payload_len);
    if (end - start < kChunkOverhead) break;  // parse_header never lets such a record through
    ok = EVP_DigestUpdate(ctx, payload + start, kChunkNonceOnDisk) == 1 &&
         EVP_DigestUpdate(ctx, payload + end - kChunkTagOnDisk, kChunkTagOnDisk) == 1;
  }
  ok = ok && EVP_DigestFinal_ex(ctx, d.data(), &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok || len != d.size()) throw std::runtime_error("SHA-256 failed");
  return d;
}

// Header fields, big-endian (docs/FORMAT.md):
//   0 magic "GCFSJRNL" | 8 be16 version | 10 be16 zero | 12 be32 path length | 16 be64 sequence |
//   24 file ID (16) | 40 be64 first chunk | 48 be32 chunk count | 52 be32 chunk size |
//   56 be64 base offset | 64 be64 old ciphertext size | 72 be64 new ciphertext size |
//   80 be64 payload length | 88 SHA-256 (32) | 120 path hint
struct ParsedHeader {
  JournalRecord rec;
  std::uint64_t payload_len = 0;
  std::uint32_t path_len = 0;
};

std::optional<ParsedHeader> parse_header(const std::uint8_t* h, std::uint64_t payload_room) {
  if (!std::equal(kMagic.begin(), kMagic.end(), h)) return std::nullopt;
  if (get16(h + 8) != kJournalRecordVersion || get16(h + 10) != 0) return std::nullopt;
  ParsedHeader p;
  p.path_len = get32(h + 12);
  p.rec.sequence = get64(h + 16);
  std::copy(h + 24, h + 40, p.rec.file_id.begin());
  p.rec.first_chunk = get64(h + 40);
  p.rec.chunk_count = get32(h + 48);
  p.rec.chunk_size = get32(h + 52);
  p.rec.base_offset = get64(h + 56);
  p.rec.old_cipher_size = get64(h + 64);
  p.rec.new_cipher_size = get64(h + 72);
  p.payload_len = get64(h + 80);
  if (p.path_len > kJournalMaxPathBytes || p.payload_len > payload_room || p.rec.chunk_count == 0 ||
      p.rec.chunk_size == 0)
    return std::nullopt;
  const std::uint64_t D = std::uint64_t{p.rec.chunk_size} + kChunkOverhead;
  // Every chunk but the last is whole; the last holds at least its nonce and tag.
  if (p.payload_len <= (p.rec.chunk_count - 1) * D + kChunkOverhead || p.payload_len > p.rec.chunk_count * D)
    return std::nullopt;
  return p;
}

// a (len_a bytes) then b (len_b bytes) at off, in one pwritev when it is not cut short.
ssize_t pwrite2_full(int fd, const std::uint8_t* a, std::size_t len_a, const std::uint8_t* b, std::size_t len_b,
                     std::uint64_t off) {
  iovec iov[2] = {{const_cast<std::uint8_t*>(a), len_a}, {const_cast<std::uint8_t*>(b), len_b}};
  ssize_t n;
  do n = ::pwritev(fd, iov, 2, static_cast<off_t>(off));
  while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  const std::size_t done = static_cast<std::size_t>(n);
  if (done >= len_a + len_b) return n;
  // Short: finish with plain pwrites.
  if (done < len_a) {
    ssize_t w = pwrite_full(fd, a + done, len_a - done, off + done);
    if (w < 0) return w;
    w = pwrite_full(fd, b, len_b, off + len_a);
    return w < 0 ? w : static_cast<ssize_t>(len_a + len_b);
  }
  ssize_t w = pwrite_full(fd, b + (done - len_a), len_b - (done - len_a), off + done);
  return w < 0 ? w : static_cast<ssize_t>(len_a + len_b);
}

}  // namespace

std::uint64_t ChunkJournal::slot_payload_bytes(std::uint32_t chunk_size) {
  const std::uint64_t d = std::uint64_t{chunk_size} + kChunkOverhead;
  const std::uint64_t room = std::max<std::uint64_t>(kJournalRunBytes, d);
  return (room + 4095) / 4096 * 4096;
}

ChunkJournal::ChunkJournal(int fd, std::string path, std::string cipherdir, std::uint32_t chunk_size, unsigned slots,
                           std::uint64_t next_sequence)
    : fd_(fd),
      path_(std::move(path)),
      cipherdir_(std::move(cipherdir)),
      chunk_size_(chunk_size),
      slot_bytes_(slot_bytes(chunk_size)),
      chunks_per_record_(static_cast<std::uint32_t>(slot_payload_bytes(chunk_size) / (std::uint64_t{chunk_size} + kChunkOverhead))),
      slot_count_(slots),
      next_sequence_(next_sequence) {
  for (unsigned i = slots; i-- > 0;) free_.push_back(i);  // slot 0 on top
}

ChunkJournal::~ChunkJournal() {
  ::close(fd_);
  if (const int d = proc_fd_dir_.load(); d >= 0) ::close(d);
}

std::unique_ptr<ChunkJournal> ChunkJournal::open(const std::string& path, const std::string& cipherdir,
                                                 std::uint32_t chunk_size, unsigned slots, std::string* error,
                                                 bool* busy) {
  if (busy) *busy = false;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  if (const int e = flock_with_grace(fd, LOCK_EX); e != 0) {
    ::close(fd);
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
  if (::fstat(fd, &st) != 0) {
    *error = "cannot stat " + path + ": " + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  // Sequence numbers keep rising across mounts: start above every number still in the file.
  std::uint64_t max_seq = 0;
  std::vector<std::uint8_t> h(kJournalRecordHeaderBytes);
  const std::uint64_t sb = slot_bytes(chunk_size);
  for (std::uint64_t off = 0; off + kJournalRecordHeaderBytes <= static_cast<std::uint64_t>(st.st_size); off += sb)
    if (pread_full(fd, h.data(), h.size(), off) == static_cast<ssize_t>(h.size())) max_seq = std::max(max_seq, get64(h.data() + 16));
  return std::unique_ptr<ChunkJournal>(new ChunkJournal(fd, path, cipherdir, chunk_size, slots, max_seq + 1));
}

std::vector<JournalRecord> ChunkJournal::read_records(const std::string& path, std::uint32_t chunk_size) {
  std::vector<JournalRecord> out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return out;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return out;
  }
  const std::uint64_t sb = slot_bytes(chunk_size), room = slot_payload_bytes(chunk_size);
  std::vector<std::uint8_t> h(kJournalHeaderBlock);
  unsigned slot = 0;
  for (std::uint64_t off = 0; off + kJournalHeaderBlock <= static_cast<std::uint64_t>(st.st_size); off += sb, ++slot) {
    if (pread_full(fd, h.data(), h.size(), off) != static_cast<ssize_t>(h.size())) break;
    auto p = parse_header(h.data(), room);
    if (!p || p->rec.chunk_size != chunk_size) continue;
    p->rec.payload.resize(p->payload_len);
    if (pread_full(fd, p->rec.payload.data(), p->payload_len, off + kJournalHeaderBlock) != static_cast<ssize_t>(p->payload_len))
      continue;
    const std::uint8_t* path_bytes = h.data() + kJournalRecordHeaderBytes;
    if (checksum(h.data(), path_bytes, p->path_len, p->rec.payload.data(), p->payload_len,
                 std::uint64_t{p->rec.chunk_size} + kChunkOverhead) !=
        *reinterpret_cast<const std::array<std::uint8_t, 32>*>(h.data() + kChecksumOffset))
      continue;  // torn (the daemon died while writing it) or damaged: ignored
    p->rec.path.assign(reinterpret_cast<const char*>(path_bytes), p->path_len);
    p->rec.slot = slot;
    out.push_back(std::move(p->rec));
  }
  ::close(fd);
  std::sort(out.begin(), out.end(), [](const JournalRecord& a, const JournalRecord& b) { return a.sequence > b.sequence; });
  return out;
}

int ChunkJournal::invalidate_records(const std::string& path, std::uint32_t chunk_size,
                                     const std::vector<JournalRecord>& records) {
  if (records.empty()) return 0;
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -errno;
  const std::array<std::uint8_t, 8> zeros{};
  int rc = 0;
  for (const auto& r : records) {
    ssize_t w = pwrite_full(fd, zeros.data(), zeros.size(), std::uint64_t{r.slot} * slot_bytes(chunk_size));
    if (w < 0) rc = static_cast<int>(w);
  }
  // Recovery has fsynced what it restored; the invalidation is made durable too, so that a power
  // loss right after cannot bring back records that recovery already dealt with.
  if (rc == 0 && ::fsync(fd) != 0) rc = -errno;
  ::close(fd);
  return rc;
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

std::vector<unsigned> ChunkJournal::take_slots(std::size_t n) {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return free_.size() >= n; });
  std::vector<unsigned> got(free_.end() - static_cast<std::ptrdiff_t>(n), free_.end());
  free_.resize(free_.size() - n);
  return got;
}

void ChunkJournal::give_back(std::vector<unsigned>& slots) {
  // Invalidate first: a slot on the free list never holds a valid record. A small pwrite over
  // the magic, no fsync (see the header comment).
  const std::array<std::uint8_t, 8> zeros{};
  for (unsigned s : slots) (void)pwrite_full(fd_, zeros.data(), zeros.size(), std::uint64_t{s} * slot_bytes_);
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
  const std::string& hint = path_hint.size() <= kJournalMaxPathBytes ? path_hint : std::string();
  Pending p;
  p.journal_ = this;
  p.slots_ = take_slots(nrec);
  std::uint64_t seq;
  {
    std::lock_guard lk(mu_);
    seq = next_sequence_;
    next_sequence_ += nrec;
  }
  std::vector<std::uint8_t> header(kJournalHeaderBlock, 0);
  for (std::size_t i = 0; i < nrec; ++i) {
    const std::uint32_t c0 = static_cast<std::uint32_t>(i) * chunks_per_record_;
    const std::uint32_t n = std::min<std::uint32_t>(chunks_per_record_, count - c0);
    const std::uint64_t pay_off = c0 * D;
    const std::uint64_t pay_len = std::min<std::uint64_t>(len - pay_off, std::uint64_t{n} * D);
    std::uint8_t* h = header.data();
    std::fill(header.begin(), header.end(), 0);
    std::copy(kMagic.begin(), kMagic.end(), h);
    put16(h + 8, kJournalRecordVersion);
    put32(h + 12, static_cast<std::uint32_t>(hint.size()));
    put64(h + 16, seq + i);
    std::copy(id.begin(), id.end(), h + 24);
    put64(h + 40, first_chunk + c0);
    put32(h + 48, n);
    put32(h + 52, chunk_size_);
    put64(h + 56, base_offset);
    put64(h + 64, old_cipher_size);
    put64(h + 72, new_cipher_size);
    put64(h + 80, pay_len);
    std::copy(hint.begin(), hint.end(), h + kJournalRecordHeaderBytes);
    const auto sum = checksum(h, h + kJournalRecordHeaderBytes, hint.size(), payload + pay_off, pay_len,
                              std::uint64_t{chunk_size_} + kChunkOverhead);
    std::copy(sum.begin(), sum.end(), h + kChecksumOffset);
    // Header page and payload in one pwritev. A record torn by the kill fails its checksum and
    // is ignored; the chunks it describes were not touched yet.
    const std::uint64_t slot_off = std::uint64_t{p.slots_[i]} * slot_bytes_;
    ssize_t w = pwrite2_full(fd_, h, kJournalHeaderBlock, payload + pay_off, pay_len, slot_off);
    if (w < 0) {
      p.release();  // zeros over whatever magic landed
      return static_cast<int>(w);
    }
  }
  *out = std::move(p);
  return 0;
}

}  // namespace gcfs
