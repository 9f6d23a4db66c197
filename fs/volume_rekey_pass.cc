#include "fs/volume_rekey_pass.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>

#include "crypto/errors.h"
#include "crypto/random.h"
#include "crypto/secret.h"
#include "fs/chunk_auth.h"
#include "fs/file_header.h"
#include "fs/plain_io.h"

namespace gcfs {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string errno_words(int e) { return std::strerror(e); }

}  // namespace

// One segment's bytes as they lie in the stream; resealed in place once its backup is written.
struct StreamRekeyPass::Segment {
  std::uint64_t first = 0;
  std::uint64_t count = 0;
  bool has_data = true;           // false: the whole range is a hole (nothing read, nothing to do)
  HostBuffer bytes;               // count * disk chunk bytes
  std::vector<bool> changed;      // chunks resealed, to be written back
  double read_s = 0, backup_s = 0, write_s = 0;  // each stage's time on this segment, on its thread
};

StreamRekeyPass::StreamRekeyPass(int fd, const ChunkLayout& layout, std::uint64_t total_chunks, StreamRekeyKeys keys,
                                 ChunkEngine& engine, std::string label, std::uint64_t segment_chunks)
    : fd_(fd), layout_(layout), total_(total_chunks), keys_(keys), engine_(engine), label_(std::move(label)),
      segment_chunks_(std::max<std::uint64_t>(segment_chunks, 1)) {}

std::uint64_t StreamRekeyPass::backup_offset(int area) const {
  return layout_.disk_offset(total_) + static_cast<std::uint64_t>(area) * segment_disk_bytes();
}

void StreamRekeyPass::read_segment(Segment* seg, std::uint64_t first, std::uint64_t count, bool whole) const {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t D = layout_.disk_chunk_size();
  const std::uint64_t at = layout_.disk_offset(first), len = count * D;
  seg->first = first;
  seg->count = count;
  // A range with no data (a sparse volume's unwritten part) is skipped without reading it.
  const off_t data = whole ? static_cast<off_t>(at) : ::lseek(fd_, static_cast<off_t>(at), SEEK_DATA);
  seg->has_data = !(data < 0 && errno == ENXIO) && !(data >= 0 && static_cast<std::uint64_t>(data) >= at + len);
  if (seg->has_data) {
    if (seg->bytes.size() < len) seg->bytes = engine_.allocate_io_buffer(len);
    const ssize_t n = pread_full(fd_, seg->bytes.data(), len, at);
    if (n < 0) throw UserError("cannot read " + label_ + ": " + errno_words(static_cast<int>(-n)));
    if (static_cast<std::uint64_t>(n) != len)
      throw CorruptData(label_ + " ends inside chunk " + std::to_string(first + static_cast<std::uint64_t>(n) / D) +
                        ": the container is shorter than its volume size");
  }
  seg->read_s = seconds_since(t0);
}

void StreamRekeyPass::write_backup(Segment& seg, int area) const {
  const auto t0 = std::chrono::steady_clock::now();
  const ssize_t n = pwrite_full(fd_, seg.bytes.data(), seg.count * layout_.disk_chunk_size(), backup_offset(area));
  if (n < 0) throw UserError("cannot write the re-key's backup of a segment to " + label_ + ": " +
                             errno_words(static_cast<int>(-n)));
  seg.backup_s = seconds_since(t0);
}

void StreamRekeyPass::sync() const {
  if (::fdatasync(fd_) != 0) throw UserError("cannot sync " + label_ + ": " + errno_words(errno));
}

void StreamRekeyPass::reseal(Segment& seg, const std::uint8_t* backup, const std::function<void()>& before_seal,
                             StreamRekeyStats* stats) {
  const std::uint64_t C = layout_.chunk_size(), D = layout_.disk_chunk_size();
  seg.changed.assign(seg.count, false);
  if (!seg.has_data) {
    stats->holes += seg.count;
    before_seal();
    return;
  }
  std::uint8_t* bytes = seg.bytes.data();
  if (plain_.size() < seg.count * C) plain_ = engine_.allocate_io_buffer(seg.count * C);
  HostBuffer& plain = plain_;
  std::vector<std::array<std::uint8_t, kChunkAadBytes>> aads(seg.count);
  auto op_for = [&](const ChunkKey* key, const std::uint8_t* form, std::uint64_t j) {
    ChunkOp op;
    op.key = key;
    std::copy(form, form + kChunkNonceOnDisk, op.nonce.begin());
    op.aad = aads[j].data();
    op.aad_len = kChunkAadBytes;
    op.in = form + kChunkNonceOnDisk;
    op.out = plain.data() + j * C;
    op.len = C;
    std::copy(form + kChunkNonceOnDisk + C, form + D, op.tag.begin());
    return op;
  };
  // Round 1: the old key, for every chunk that is not a hole.
  std::vector<ChunkOp> ops;
  std::vector<std::uint64_t> which;
  for (std::uint64_t j = 0; j < seg.count; ++j) {
    const std::uint8_t* form = bytes + j * D;
    if (all_zero(form, D)) {  // never written or discarded; the pass never writes zeros
      ++stats->holes;
      continue;
    }
    aads[j] = chunk_aad(keys_.id, seg.first + j);
    ops.push_back(op_for(keys_.old_key, form, j));
    which.push_back(j);
  }
  if (!ops.empty()) engine_.open(ops);
  std::vector<std::uint64_t> to_seal, unopened;
  for (std::size_t i = 0; i < ops.size(); ++i) (ops[i].ok ? to_seal : unopened).push_back(which[i]);
  // Round 2: the new key (a hot zone that a run before this one rewrote), then the backup copy
  // under the old key (a chunk whose rewrite was cut short).
  if (!unopened.empty()) {
    ops.clear();
    for (std::uint64_t j : unopened) ops.push_back(op_for(keys_.new_key, bytes + j * D, j));
    engine_.open(ops);
    std::vector<std::uint64_t> still;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].ok)
        ++stats->already_new;
      else
        still.push_back(unopened[i]);
    }
    ops.clear();
    if (backup)
      for (std::uint64_t j : still) ops.push_back(op_for(keys_.old_key, backup + j * D, j));
    if (!ops.empty()) engine_.open(ops);
    for (std::size_t i = 0; i < still.size(); ++i) {
      if (i < ops.size() && ops[i].ok)
        to_seal.push_back(still[i]);
      else
        stats->damaged.push_back(seg.first + still[i]);
    }
  }
  // Seal what opened under the old key, in place of its old form, with a fresh nonce each.
  before_seal();
  std::sort(to_seal.begin(), to_seal.end());
  std::vector<std::uint8_t> nonces(to_seal.size() * kChunkNonceOnDisk);
  if (!nonces.empty()) random_bytes(nonces);
  ops.clear();
  for (std::size_t i = 0; i < to_seal.size(); ++i) {
    const std::uint64_t j = to_seal[i];
    ChunkOp op;
    op.key = keys_.new_key;
    std::copy_n(nonces.data() + i * kChunkNonceOnDisk, kChunkNonceOnDisk, op.nonce.begin());
    op.aad = aads[j].data();
    op.aad_len = kChunkAadBytes;
    op.in = plain.data() + j * C;
    op.out = bytes + j * D + kChunkNonceOnDisk;
    op.len = C;
    ops.push_back(op);
  }
  if (!ops.empty()) engine_.seal(ops);
  for (std::size_t i = 0; i < to_seal.size(); ++i) {
    std::uint8_t* form = bytes + to_seal[i] * D;
    std::copy(ops[i].nonce.begin(), ops[i].nonce.end(), form);
    std::copy(ops[i].tag.begin(), ops[i].tag.end(), form + kChunkNonceOnDisk + C);
    seg.changed[to_seal[i]] = true;
  }
  stats->resealed += to_seal.size();
  secure_wipe(plain.data(), seg.count * C);
}

void StreamRekeyPass::write_changed(Segment& seg) const {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t D = layout_.disk_chunk_size();
  for (std::uint64_t j = 0; j < seg.count;) {
    if (!seg.changed[j]) {
      ++j;
      continue;
    }
    std::uint64_t end = j;
    while (end < seg.count && seg.changed[end]) ++end;
    const ssize_t n = pwrite_full(fd_, seg.bytes.data() + j * D, (end - j) * D, layout_.disk_offset(seg.first + j));
    if (n < 0) throw UserError("cannot write " + label_ + ": " + errno_words(static_cast<int>(-n)));
    j = end;
  }
  seg.write_s = seconds_since(t0);
}

StreamRekeyStats StreamRekeyPass::run(StreamRekeyProgress from, const Persist& persist, const Report& report) {
  using Clock = std::chrono::steady_clock;
  StreamRekeyStats stats;
  const std::uint64_t C = layout_.chunk_size();
  double waited = 0;  // the caller's thread waiting inside reseal for a write: not cipher time
  auto timed_wait = [&](std::future<void>& f) {
    if (!f.valid()) return;
    const auto t0 = Clock::now();
    f.get();
    waited += seconds_since(t0);
  };
  auto cipher = [&](Segment& seg, const std::uint8_t* backup, const std::function<void()>& before_seal) {
    const auto t0 = Clock::now();
    const double waited_before = waited;
    reseal(seg, backup, before_seal, &stats);
    stats.cipher_s += seconds_since(t0) - (waited - waited_before);
  };
  auto durable = [&](const StreamRekeyProgress& p) {
    const auto t0 = Clock::now();
    sync();
    persist(p);
    const double s = seconds_since(t0);
    stats.sync_s += s, stats.write_s += s;
  };

  // A hot zone left by a run that stopped: its chunks are each old, new, or cut short with
  // their old form in the backup area, which is not written again until the zone is done.
  if (from.hot_count > 0) {
    Segment seg, backup;
    read_segment(&seg, from.hot_first, from.hot_count, true);
    backup.bytes = engine_.allocate_io_buffer(from.hot_count * layout_.disk_chunk_size());
    const ssize_t n = pread_full(fd_, backup.bytes.data(), backup.bytes.size(), backup_offset(from.hot_area));
    if (n < 0) throw UserError("cannot read the re-key's backup in " + label_ + ": " + errno_words(static_cast<int>(-n)));
    cipher(seg, backup.bytes.data(), [] {});
    write_changed(seg);
    stats.read_s += seg.read_s, stats.write_s += seg.write_s;
    from = StreamRekeyProgress{from.hot_first + from.hot_count, 0, 0, 0};
    durable(from);
    report(from.done_chunks * C, total_ * C);
  }

  // Three segments in turn: one read ahead, one resealed (its backup written meanwhile), one
  // written back in place. Each task writes only its own segment's fields.
  std::array<Segment, 3> slots;
  std::future<void> reading, backing_up, writing_back;
  Segment* written = nullptr;  // the segment writing_back works on
  auto finish_write_back = [&] {
    timed_wait(writing_back);
    if (written) stats.write_s += written->write_s, written = nullptr;
  };
  auto start_read = [&](Segment* slot, std::uint64_t at) {
    if (written == slot) finish_write_back();  // after runs of holes, the slot may still be in use
    const std::uint64_t count = std::min(segment_chunks_, total_ - at);
    reading = std::async(std::launch::async, [this, slot, at, count] { read_segment(slot, at, count, false); });
  };
  std::uint64_t first = from.done_chunks;
  int area = 0;
  std::size_t i = 0;
  if (first < total_) start_read(&slots[0], first);
  while (first < total_) {
    Segment& seg = slots[i % 3];
    timed_wait(reading);
    stats.read_s += seg.read_s;
    const std::uint64_t next = first + seg.count;
    if (next < total_) start_read(&slots[(i + 1) % 3], next);
    if (!seg.has_data) {  // all hole: nothing to back up or write
      stats.holes += seg.count;
    } else {
      backing_up = std::async(std::launch::async, [this, &seg, area] { write_backup(seg, area); });
      cipher(seg, nullptr, [&] { timed_wait(backing_up); });
      stats.write_s += seg.backup_s;
      finish_write_back();  // the segment before
      // One sync makes the segment before durable in place and this one's backup durable; only
      // then does the record name this segment the hot zone (its backup in `area`).
      durable(StreamRekeyProgress{first, first, seg.count, area});
      written = &seg;
      writing_back = std::async(std::launch::async, [this, &seg] { write_changed(seg); });
      area ^= 1;
    }
    first = next, ++i;
    report(first * C, total_ * C);
  }
  finish_write_back();
  durable(StreamRekeyProgress{total_, 0, 0, 0});
  return stats;
}

}  // namespace gcfs
