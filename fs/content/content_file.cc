// The content file as an object: its descriptor, and the plaintext size it caches, loaded from
// the ciphertext size (docs/FORMAT.md "Sizes").
#include "fs/content/content_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "fs/log.h"

namespace gcfs {

ContentFile::ContentFile(int fd, const ChunkLayout& layout, ChunkEngine& engine, const KeyRing& keys, FileLabel label,
                         ChunkJournal* journal, BackingIo* io)
    : fd_(fd),
      io_(layout.aligned() ? io : nullptr),  // format 1's chunks are not aligned: always buffered
      layout_(layout),
      format_(layout.content()),
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


void ContentFile::mark_durable() {
  std::shared_lock lk(size_mu_);
  if (size_valid_) durable_size_.store(size_);
}

int ContentFile::corrupt(const std::string& what) {
  log::error(label_.str() + ": " + what);
  return -EIO;
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

int ContentFile::load_size_if_needed_locked() { return size_valid_ ? 0 : load_size_locked(); }

}  // namespace gcfs
