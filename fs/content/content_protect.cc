// Crash journal protection of a content file's rewrites: before chunks that may hold durable data
// are overwritten in place, their pre-image goes to the journal (chunk_journal.h), so that a
// daemon killed in the middle of the pwrite leaves something the next mount can put back.
#include "fs/content/content_file.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "fs/chunk_io.h"
#include "fs/log.h"

namespace gcfs {

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
  // The journal holds chunk forms (nonce | ciphertext | tag), as the format gathers them.
  const std::uint64_t len = chunk_forms_bytes(layout_, run.first, run.last, size_);
  const std::uint8_t* bytes = nullptr;
  if (int rc = format_.pre_image(*this, run, seen, &bytes); rc < 0) return rc;
  const std::uint64_t old_cipher = layout_.base_offset() + layout_.cipher_size(size_);
  int rc = journal_->record(header_->id, run.first, static_cast<std::uint32_t>(run.count()), layout_.base_offset(),
                            old_cipher, new_cipher, path_hint(), bytes, len, pending);
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
  *pre_len = len;
  *pre_first = run.first;
  return 0;
}

}  // namespace gcfs
