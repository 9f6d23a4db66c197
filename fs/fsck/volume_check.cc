#include "fs/fsck/volume_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "crypto/secret.h"
#include "fs/chunk_auth.h"
#include "fs/plain_io.h"
#include "fs/file_header.h"

namespace gcfs {
namespace {

constexpr std::uint64_t kBatchBytes = 8 << 20;  // ciphertext read and opened per engine call

}  // namespace

VolumeCheckReport check_volume_content(int fd, const ChunkLayout& layout, const KeyRing& keys, ChunkEngine& engine,
                                       std::uint64_t volume_size,
                                       const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  VolumeCheckReport rep;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    rep.problems.push_back(std::string("cannot stat the container: ") + std::strerror(errno));
    return rep;
  }
  const std::uint64_t base = layout.base_offset();
  const std::uint64_t expected = base + layout.cipher_size(volume_size);
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  if (file_size < expected) {
    rep.problems.push_back("the container is " + std::to_string(file_size) + " bytes, shorter than the " +
                           std::to_string(expected) + " its volume size needs (truncated): chunks past its end are lost");
  } else if (file_size > expected) {
    rep.problems.push_back("the container is " + std::to_string(file_size) + " bytes, longer than the " +
                           std::to_string(expected) +
                           " its volume size needs: an interrupted resize (the next read-write mount cuts it back)");
  }
  std::array<std::uint8_t, kFileHeaderBytes> raw{};
  const auto header = pread_full(fd, raw.data(), raw.size(), base) == static_cast<ssize_t>(raw.size())
                          ? FileHeader::decode(raw)
                          : std::nullopt;
  if (!header) {
    rep.problems.push_back("the content stream's header (at byte " + std::to_string(base) +
                           ") is damaged: no chunk of the volume can be read");
    return rep;
  }
  const ChunkKey key = keys.content_key(header->id);
  const std::uint64_t C = layout.chunk_size(), D = layout.disk_chunk_size();
  // What can be checked: the chunks whose ciphertext the file still holds whole.
  std::uint64_t end_chunk = layout.chunk_count(volume_size);
  const auto disk_end = [&](std::uint64_t k) { return layout.disk_offset(k) + layout.chunk_plain_len(k, volume_size) + kChunkOverhead; };
  if (end_chunk > 0 && file_size < disk_end(end_chunk - 1))
    end_chunk = file_size > layout.disk_offset(0) ? std::min(end_chunk, (file_size - layout.disk_offset(0)) / D) : 0;
  const std::uint64_t total = layout.chunk_count(volume_size) * D;
  const std::uint64_t per_batch = std::max<std::uint64_t>(1, kBatchBytes / D);
  std::uint64_t done = 0;
  std::vector<std::uint64_t> bad;
  std::vector<std::uint8_t> ct, pt;
  for (std::uint64_t first = 0; first < end_chunk;) {
    // Chunks wholly inside a hole read as zeros: holes, counted without reading.
    const off_t at = ::lseek(fd, static_cast<off_t>(layout.disk_offset(first)), SEEK_DATA);
    std::uint64_t data = first;
    if (at < 0 && errno == ENXIO) data = end_chunk;
    else if (at >= 0 && static_cast<std::uint64_t>(at) > layout.disk_offset(first))
      data = std::min(end_chunk, (static_cast<std::uint64_t>(at) - layout.disk_offset(0)) / D);
    if (data > first) {
      rep.chunks += data - first;
      rep.holes += data - first;
      done += (data - first) * D;
      if (progress) progress(std::min(done, total), total);
      first = data;
      continue;
    }
    std::uint64_t last = std::min(end_chunk, first + per_batch) - 1;
    // And no further than the data reaches: the hole after it is counted on the next round.
    const off_t from = std::max<off_t>(static_cast<off_t>(layout.disk_offset(first)), at);  // past a hole inside this chunk
    const off_t hole = ::lseek(fd, from, SEEK_HOLE);
    if (hole > 0 && static_cast<std::uint64_t>(hole) > layout.disk_offset(first))
      last = std::max(first, std::min(last, (static_cast<std::uint64_t>(hole) - 1 - layout.disk_offset(0)) / D));
    const std::uint64_t begin = layout.disk_offset(first);
    const std::uint64_t len_bytes = disk_end(last) - begin;
    ct.resize(len_bytes);
    pt.resize((last - first + 1) * C);
    const ssize_t n = pread_full(fd, ct.data(), ct.size(), begin);
    if (n != static_cast<ssize_t>(ct.size())) {
      rep.problems.push_back("cannot read chunks " + std::to_string(first) + "-" + std::to_string(last) + ": " +
                             (n < 0 ? std::strerror(static_cast<int>(-n)) : "short read"));
      break;
    }
    const ChunkRunCheck run =
        check_chunk_run(engine, layout, key, header->id, first, last, volume_size, ct.data(), &pt, &bad);
    rep.chunks += last - first + 1;
    rep.holes += run.holes;
    rep.bytes += ct.size();
    done += (last - first + 1) * D;
    if (progress) progress(std::min(done, total), total);
    first = last + 1;
  }
  if (!bad.empty())
    rep.problems.push_back((bad.size() == 1 ? "chunk " : "chunks ") + describe_chunk_runs(bad, 20) + " of " +
                           std::to_string(layout.chunk_count(volume_size)) + " (" + std::to_string(C) +
                           " bytes each, at byte offsets chunk × " + std::to_string(C) + " of volume.img) " +
                           (bad.size() == 1 ? "fails" : "fail") + " authentication: reading them gives EIO");
  if (progress) progress(total, total);
  return rep;
}

}  // namespace gcfs
