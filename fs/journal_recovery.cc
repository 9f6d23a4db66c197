#include "fs/journal_recovery.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "fs/plain_io.h"
#include "fs/file_header.h"
#include "fs/chunk_auth.h"
#include "fs/chunk_io.h"
#include "fs/content/content_format.h"
#include "fs/log.h"
#include "fs/safe_open.h"

namespace gcfs {
namespace {

// True when the on-disk form of chunk k (nonce | ciphertext | tag, `bytes` long) authenticates
// under key, or is a hole (all zeros).
bool authentic(const std::uint8_t* src, std::size_t bytes, const ChunkKey& key, const FileId& id, std::uint64_t k,
               ChunkEngine& engine) {
  if (bytes < kChunkOverhead) return false;
  if (all_zero(src, bytes)) return true;
  const std::size_t len = bytes - kChunkOverhead;
  std::vector<std::uint8_t> plain(len ? len : 1);
  const auto aad = chunk_aad(id, k);
  ChunkOp op;
  op.key = &key;
  std::copy(src, src + kChunkNonceOnDisk, op.nonce.begin());
  op.aad = aad.data();
  op.aad_len = aad.size();
  op.in = src + kChunkNonceOnDisk;
  op.out = plain.data();
  op.len = len;
  std::copy(src + kChunkNonceOnDisk + len, src + bytes, op.tag.begin());
  std::vector<ChunkOp> ops{op};
  engine.open(ops);
  secure_wipe(plain.data(), plain.size());
  return ops[0].ok;
}

enum class DiskChunk { Absent, Good, Bad };

// Chunk k as the mount would read it from a file of ciphertext size S: the format finds its form.
DiskChunk disk_chunk(int fd, std::uint64_t S, std::uint64_t k, const ChunkLayout& layout, const ChunkKey& key,
                     const FileId& id, ChunkEngine& engine) {
  std::vector<std::uint8_t> form;
  switch (layout.content().stored_chunk(fd, layout, S, k, &form)) {
    case StoredChunk::Absent:
      return DiskChunk::Absent;
    case StoredChunk::Torn:
      return DiskChunk::Bad;
    case StoredChunk::Form:
      break;
  }
  return authentic(form.data(), form.size(), key, id, k, engine) ? DiskChunk::Good : DiskChunk::Bad;
}

// A path hint as it may go into the log: it came from a file anyone may have written.
std::string printable(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

std::string hex(const FileId& id) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (auto b : id) s += digits[b >> 4], s += digits[b & 15];
  return s;
}

}  // namespace

RestorePlan restore_from_records(int fd, const FileId& id, const std::vector<const JournalRecord*>& records,
                                 const ChunkLayout& layout, const KeyRing& keys, ChunkEngine& engine, bool apply) {
  RestorePlan plan;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    plan.error = -errno;
    return plan;
  }
  const std::uint64_t S = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t D = layout.disk_chunk_size();
  const ChunkKey key = keys.content_key(id);
  std::vector<const JournalRecord*> recs = records;
  std::sort(recs.begin(), recs.end(), [](auto* a, auto* b) { return a->sequence > b->sequence; });
  std::set<std::uint64_t> decided;
  std::uint64_t cut_to = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t restored_end = 0;  // the end on disk of the furthest chunk put back
  std::vector<std::uint8_t> payload;  // one record's pre-images at a time
  for (const JournalRecord* r : recs) {
    if (r->file_id != id || r->chunk_size != layout.chunk_size() || r->base_offset != layout.base_offset()) continue;
    // The file grew past what this write could have made it: the record is stale (its write
    // finished and something later changed the file), so it says nothing about the file now.
    if (S > std::max(r->old_cipher_size, r->new_cipher_size)) continue;
    // A pre-image goes back where the file kept that chunk at its size before the write (format 2:
    // chunk 0 of a small file lies in the header block, else at its aligned place).
    const ContentFormat& format = layout.content();
    const std::optional<std::uint64_t> old_plain = format.restore_size(layout, r->old_cipher_size);
    if (!old_plain) continue;  // no write starts from such a size
    // Read now, and checked again against the record's digest: the journal may have changed
    // since it was scanned.
    if (r->load_payload(&payload) != 0) continue;
    bool restored_any = false;
    // first_chunk + chunk_count is bounded by the record's parser: no index here can wrap, and
    // every disk offset fits an off_t.
    for (std::uint32_t i = 0; i < r->chunk_count; ++i) {
      const std::uint64_t k = r->first_chunk + i;
      if (decided.count(k)) continue;
      const std::uint64_t pre_off = std::uint64_t{i} * D;
      if (pre_off >= payload.size()) break;
      const std::size_t pre_len = static_cast<std::size_t>(std::min<std::uint64_t>(D, payload.size() - pre_off));
      const std::uint8_t* pre = payload.data() + pre_off;
      const DiskChunk now = disk_chunk(fd, S, k, layout, key, id, engine);
      if (now != DiskChunk::Bad) {
        decided.insert(k);  // intact (or gone): never touched
        continue;
      }
      // What is written back must prove itself a genuine chunk k of this very file: it passes
      // AES-GCM under the file's key with the chunk's AAD. A hole (all zeros) cannot prove
      // anything, so it is taken only from a record whose HMAC says this vault wrote it; a
      // version 2 record's SHA-256 anyone can compute.
      if (r->legacy() && all_zero(pre, pre_len)) continue;
      if (!authentic(pre, pre_len, key, id, k, engine)) continue;  // an older record may hold a good one
      // The pre-image must be the chunk as the file held it at its old size.
      if (!format.form_fits(layout, k, *old_plain, pre_len)) continue;
      decided.insert(k);
      if (apply) {
        const int w = write_chunk_forms(fd, layout, k, *old_plain, pre, pre_len);
        if (w < 0) {
          plan.error = w;
          continue;
        }
      }
      plan.chunks.push_back(k);
      const std::uint64_t end_on_disk = format.form_end(layout, k, *old_plain, pre_len);
      restored_end = std::max<std::uint64_t>(restored_end, end_on_disk);
      restored_any = true;
    }
    // A torn write that had extended the file: everything past the old size is that write's
    // unacknowledged data (growing writes run alone on a file); the restored chunk is the old end.
    if (restored_any && S > r->old_cipher_size) cut_to = std::min(cut_to, r->old_cipher_size);
  }
  std::sort(plan.chunks.begin(), plan.chunks.end());
  // Never a cut into a chunk just put back: such a size is not one the write can have started
  // from (a forged record), and the cut would only destroy what was restored.
  if (cut_to != std::numeric_limits<std::uint64_t>::max() && cut_to >= restored_end) {
    plan.truncated = true;
    if (apply && ::ftruncate(fd, static_cast<off_t>(cut_to)) != 0) plan.error = -errno;
  }
  if (apply && !plan.chunks.empty() && ::fsync(fd) != 0) plan.error = -errno;
  return plan;
}

std::size_t recover_from_journal(int cipherdir_fd, const std::string& cipherdir,
                                 const std::vector<JournalRecord>& records, const ChunkLayout& layout,
                                 const KeyRing& keys, ChunkEngine& engine) {
  std::map<std::pair<std::string, FileId>, std::vector<const JournalRecord*>> by_file;
  for (const auto& r : records) by_file[{r.path, r.file_id}].push_back(&r);
  std::size_t restored = 0;
  for (const auto& [key, recs] : by_file) {
    const auto& [rel, id] = key;
    if (rel.empty()) {
      log::warning("crash journal: a record for file ID " + hex(id) + " has no path; skipped");
      continue;
    }
    // The hint is resolved beneath CIPHERDIR only: no "..", no absolute path, no symbolic link
    // on the way, a regular file at the end (never a FIFO to block on).
    OpenResult o = open_beneath(cipherdir_fd, rel, FileType::Regular, O_RDWR);
    const std::string path = cipherdir + "/" + printable(rel);
    if (!o) {
      log::warning("crash journal: a record for " + path + " is skipped: " +
                   (o.error == ENOENT ? std::string("the file is gone (removed or renamed since)")
                                      : "its path " + o.why()));
      continue;
    }
    const int fd = o.fd.get();
    std::array<std::uint8_t, kFileHeaderBytes> raw{};
    const bool have = pread_full(fd, raw.data(), raw.size(), layout.base_offset()) == static_cast<ssize_t>(raw.size());
    const auto header = have ? FileHeader::decode(raw, static_cast<std::uint16_t>(layout.format())) : std::nullopt;
    if (!header || header->id != id) {
      log::warning("crash journal: a record for " + path + " is skipped: the file there now has another file ID");
      continue;
    }
    const RestorePlan plan = restore_from_records(fd, id, recs, layout, keys, engine, true);
    for (std::uint64_t k : plan.chunks)
      log::warning("restored chunk " + std::to_string(k) + " of " + path + " from the crash journal");
    if (plan.truncated && !plan.chunks.empty())
      log::warning(path + ": cut back to its size before the interrupted write");
    if (plan.error)
      log::error("crash journal: restoring " + path + " failed: " + std::strerror(-plan.error));
    restored += plan.chunks.size();
  }
  return restored;
}

}  // namespace gcfs
