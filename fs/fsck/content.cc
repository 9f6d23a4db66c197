// fsck of a regular file's contents: its header, its size and every chunk's tag, read as the
// vault's content format gathers them (chunk_io.h), holes skipped; torn chunks the crash journal
// can put back are restored (--repair) or reported as recoverable.
#include "fs/fsck/checker.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "fs/chunk_auth.h"
#include "fs/chunk_io.h"
#include "fs/content/content_format.h"
#include "fs/file_header.h"
#include "fs/journal_recovery.h"
#include "fs/log.h"
#include "fs/plain_io.h"

namespace gcfs::fsck {

// Chunks of a file that fail (or a size that is impossible) which the crash journal can put
// back. With --repair (and the journal's lock) they are restored and the file is checked
// again: returns true, all is reported. Otherwise returns false and sets *note to append to
// the problem ("" when the journal cannot help).
bool Checker::try_journal(int fd, const FileId& id, int dirfd, const Where& where, std::string* note) {
  auto it = journal_by_id_.find(id);
  if (it == journal_by_id_.end()) return false;
  const RestorePlan plan = restore_from_records(fd, id, it->second, vault_.layout(), vault_.keys(), engine_, false);
  if (plan.chunks.empty()) return false;
  if (journal_lock_) {
    // For writing, the same name beneath the same directory descriptor, and the same inode.
    OpenResult rw = open_beneath(dirfd, where.name, FileType::Regular, O_RDWR);
    struct stat was {}, now {};
    if (rw && ::fstat(fd, &was) == 0 && ::fstat(rw.fd.get(), &now) == 0 && was.st_dev == now.st_dev &&
        was.st_ino == now.st_ino) {
      const std::string cpath = where.cipher();
      const RestorePlan done =
          restore_from_records(rw.fd.get(), id, it->second, vault_.layout(), vault_.keys(), engine_, true);
      for (std::uint64_t k : done.chunks) {
        report_.restored.push_back("restored chunk " + std::to_string(k) + " of " + cpath + " from the crash journal");
        log::warning("restored chunk " + std::to_string(k) + " of " + vault_.cipherdir() + "/" + cpath +
                     " from the crash journal");
      }
      struct stat st {};
      if (done.error == 0 && ::fstat(rw.fd.get(), &st) == 0) {
        check_content(rw.fd.get(), static_cast<std::uint64_t>(st.st_size), dirfd, where, /*after_restore=*/true);
        return true;
      }
    }
  }
  *note = std::string("; ") + (plan.chunks.size() == 1 ? "chunk " : "chunks ") + describe_runs(plan.chunks) +
          (plan.chunks.size() == 1 ? " is" : " are") +
          " recoverable from the crash journal: mount the vault or run fsck --repair to restore " +
          (plan.chunks.size() == 1 ? "it" : "them");
  return false;
}

// The first chunk at or after `first` that may hold data: chunks wholly inside a hole of a
// sparse file read as zeros, which the format calls holes, so they are counted without being
// read (a 1 TiB sparse file is checked in one step). nchunks when only holes follow.
std::uint64_t Checker::next_data_chunk(int fd, std::uint64_t first, std::uint64_t nchunks) const {
  const ChunkLayout& layout = vault_.layout();
  return layout.content().next_data_chunk(layout, fd, first, nchunks);
}

void Checker::check_content(int fd, std::uint64_t size, int dirfd, const Where& where, bool after_restore) {
  const ChunkLayout& layout = vault_.layout();
  if (size == 0) return;  // an empty plaintext file
  // A file checked again after --repair restored chunks was counted the first time.
  const std::uint64_t counts = after_restore ? 0 : 1;
  if (size < kFileHeaderBytes) {
    progress_.done_bytes += size;
    problem(where.cipher(), where.plain(),
            "ciphertext is " + std::to_string(size) + " bytes, shorter than a file header (truncated)", true);
    return;
  }
  std::array<std::uint8_t, kFileHeaderBytes> raw{};
  if (pread_full(fd, raw.data(), raw.size(), 0) != static_cast<ssize_t>(raw.size())) {
    problem(where.cipher(), where.plain(), std::string("cannot read the file header: ") + std::strerror(errno), false);
    return;
  }
  auto header = FileHeader::decode(raw, static_cast<std::uint16_t>(layout.format()));
  if (!header) {
    progress_.done_bytes += size;
    problem(where.cipher(), where.plain(),
            "file header is damaged (not a gpucryptfs version " + std::to_string(layout.format()) +
                " header): nothing in the file can be read",
            true);
    return;
  }
  auto plain_size = layout.plain_size(size);
  bool size_bad = false;
  std::uint64_t checkable = 0;
  if (plain_size) {
    checkable = *plain_size;
  } else {
    // A torn last chunk (format 1) or a file ending inside a metadata block (format 2): check
    // the whole chunks before it. A format 2 size that no write leaves has none.
    size_bad = true;
    checkable = layout.readable_plain_size(size).value_or(0);
  }
  const ChunkKey key = vault_.keys().content_key(header->id);
  const std::uint64_t C = layout.chunk_size(), D = layout.disk_chunk_size();
  const std::uint64_t nchunks = layout.chunk_count(checkable);
  const std::uint64_t per_batch = std::max<std::uint64_t>(1, kBatchBytes / D);
  // Where chunk k's form ends and begins among the forms of the file's chunks back to back: the
  // bytes read (and, for holes, skipped) are counted in forms, whatever the format.
  const auto disk_end = [&](std::uint64_t k) { return chunk_forms_bytes(layout, 0, k, checkable); };
  const auto disk_begin = [&](std::uint64_t k) {
    return k == 0 ? std::uint64_t{0} : chunk_forms_bytes(layout, 0, k - 1, checkable);
  };
  std::vector<std::uint64_t> bad;
  std::vector<std::uint8_t> ct, pt;
  std::uint64_t opened = 0, accounted = 0;
  for (std::uint64_t first = 0; first < nchunks;) {
    if (const std::uint64_t data = next_data_chunk(fd, first, nchunks); data > first) {
      const std::uint64_t skipped = disk_end(data - 1) - disk_begin(first);
      report_.chunks += (data - first) * counts;
      report_.holes += (data - first) * counts;
      accounted += skipped;  // skipped, not read: not progress (bytes_to_check leaves holes out)
      first = data;
      report_progress();
      continue;
    }
    const std::uint64_t last = std::min(nchunks, first + per_batch) - 1;
    const std::uint64_t begin = disk_begin(first);
    const std::uint64_t end = disk_end(last);
    ct.resize(end - begin);
    pt.resize((last - first + 1) * C);
    // The chunks' forms (nonce | ciphertext | tag), as the format gathers them (chunk_io.h).
    ssize_t n = read_chunk_forms(fd, layout, first, last, checkable, ct.data());
    if (n != static_cast<ssize_t>(ct.size())) {
      problem(where.cipher(), where.plain(),
              std::string("cannot read the ciphertext: ") + (n < 0 ? std::strerror(static_cast<int>(-n)) : "short read"),
              false);
      return;
    }
    const ChunkRunCheck run =
        check_chunk_run(engine_, layout, key, header->id, first, last, checkable, ct.data(), &pt, &bad);
    report_.chunks += (last - first + 1) * counts;
    report_.holes += run.holes * counts;
    opened += run.opened;
    progress_.done_bytes += ct.size() * counts;
    accounted += ct.size();
    report_progress();
    first = last + 1;
  }
  progress_.done_bytes += (size - accounted) * counts;  // the header and a torn tail (holes are in accounted)
  report_.bytes += size * counts;
  std::string journal_note;
  if ((size_bad || !bad.empty()) && !after_restore && try_journal(fd, header->id, dirfd, where, &journal_note)) return;
  const bool recoverable = !journal_note.empty();
  if (size_bad && !layout.readable_plain_size(size)) {
    // A size no write leaves, whole or cut short (format 2: chunk 0 cut short while it moved out
    // of the header block). Nothing reads.
    problem(where.cipher(), where.plain(),
            "ciphertext size " + std::to_string(size) + " is impossible for format " +
                std::to_string(layout.format()) + " (" + layout.content().why_size_impossible() +
                "): the mount reads nothing of it" + journal_note,
            !recoverable);
    return;
  }
  if (size_bad) {
    std::uint64_t tail = 0;
    (void)layout.readable_plain_size(size, &tail);
    // The mount reads such a file as its whole chunks (an append cut short between pages
    // leaves exactly this), so it is not unreadable unless its chunks are.
    problem(where.cipher(), where.plain(),
            "ciphertext size " + std::to_string(size) +
                layout.content().describe_fragment(tail) +
                ": a write cut short, or a cut; the mount reads the " + std::to_string(nchunks) +
                " whole chunks before it and drops the fragment at the next write" +
                (bad.empty() ? std::string() : "; also chunks " + describe_runs(bad) + " fail authentication") +
                journal_note,
            !recoverable && !bad.empty() && bad.size() == opened);
    return;
  }
  if (bad.empty()) return;
  const bool all_bad = bad.size() == opened;
  std::string what = (bad.size() == 1 ? "chunk " : "chunks ") + describe_runs(bad) + " of " + std::to_string(nchunks) +
                     " (" + std::to_string(C) + " plaintext bytes each) " +
                     (bad.size() == 1 ? "fails" : "fail") + " authentication";
  if (all_bad && opened > 1)
    what += ": every chunk fails, so the header was probably replaced or the file comes from another vault";
  else
    what += ": reading them gives EIO, the other chunks read";
  // A file none of whose chunks read is moved aside by --repair, unless the journal can restore it.
  problem(where.cipher(), where.plain(), what + journal_note, all_bad && !recoverable);
}

}  // namespace gcfs::fsck
