// The bulk of `volume rekey`: every chunk of a volume container's content stream opened under the
// old content key and sealed again under the new one, in place, one segment at a time, so that a
// process killed (or a machine losing power) at any moment loses nothing.
//
// Why a backup of each segment: a chunk is 64 KiB of one GCM message, and a write cut short (a
// kill between pages of a pwrite, a torn write at a power cut) can leave a chunk that is neither
// its old ciphertext nor its new one, which no key opens. So the old ciphertext of the segment
// being rewritten (the *hot zone*) is first copied to a backup area past the end of the stream and
// made durable, and only then is the segment overwritten (LUKS2's "journal" resilience). Two
// backup areas take turns, so that one fdatasync makes both the previous segment's rewrite and the
// next segment's backup durable: two syncs a segment, the record's included.
//
// Every chunk tells which key it is under (its tag opens under one or neither; its AAD binds its
// position), so the pass needs no per-chunk bookkeeping: a chunk of the hot zone that opens under
// the new key is done, one that opens under the old key (or whose backup copy does) is resealed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"
#include "crypto/key_ring.h"
#include "fs/chunk_layout.h"

namespace gcfs {

// Where a re-key of a stream stands: what its record (fs/volume_rekey_record.h) keeps.
struct StreamRekeyProgress {
  std::uint64_t done_chunks = 0;  // chunks [0, done_chunks) are under the new key
  // The hot zone, chunks [hot_first, hot_first + hot_count): being rewritten, their old ciphertext
  // held in backup area hot_area. hot_count 0: none.
  std::uint64_t hot_first = 0;
  std::uint64_t hot_count = 0;
  int hot_area = 0;
  bool operator==(const StreamRekeyProgress&) const = default;
};

struct StreamRekeyStats {
  std::uint64_t resealed = 0;     // chunks moved to the new key by this run
  std::uint64_t already_new = 0;  // chunks of a hot zone found done
  std::uint64_t holes = 0;        // all-zero chunks, left as holes
  std::vector<std::uint64_t> damaged;  // chunks no key opened (nor their backup): left as they were
  double read_s = 0, cipher_s = 0, write_s = 0;  // busy time of each stage (they overlap)
  double sync_s = 0;                             // of which fdatasync and the record, in write_s
};

struct StreamRekeyKeys {
  const ChunkKey* old_key = nullptr;
  const ChunkKey* new_key = nullptr;
  FileId id{};  // the stream's file ID (kept: the new key alone makes every chunk's key new)
};

class StreamRekeyPass {
 public:
  // persist: makes the progress durable (the record); called with the file's data already synced.
  using Persist = std::function<void(const StreamRekeyProgress&)>;
  // report: bytes of plaintext covered so far, of the total; called after every segment.
  using Report = std::function<void(std::uint64_t done_bytes, std::uint64_t total_bytes)>;

  // fd: the container, open read-write. total_chunks: the stream's, every one whole (a volume's
  // size is a whole number of chunks). segment_chunks: chunks a segment (the hot zone's size).
  StreamRekeyPass(int fd, const ChunkLayout& layout, std::uint64_t total_chunks, StreamRekeyKeys keys,
                  ChunkEngine& engine, std::string label, std::uint64_t segment_chunks);

  // Finishes the re-key from where `from` says it stands (a hot zone first), then every later
  // segment. Returns with done_chunks == total_chunks persisted and the data synced. Throws
  // UserError on a read, write or sync failure (the record then says where to go on from).
  StreamRekeyStats run(StreamRekeyProgress from, const Persist& persist, const Report& report);

  // Where backup area a lies: past the stream's last chunk (the rekey cuts it off at the end).
  std::uint64_t backup_offset(int area) const;
  std::uint64_t segment_disk_bytes() const { return segment_chunks_ * layout_.disk_chunk_size(); }

 private:
  struct Segment;
  // whole: read the range even where SEEK_DATA finds no data (a hot zone).
  void read_segment(Segment* seg, std::uint64_t first, std::uint64_t count, bool whole) const;
  void write_backup(Segment& seg, int area) const;
  // Opens seg's chunks (old key, then new, then the backup copy under the old), calls
  // before_seal (which waits until seg's old bytes are no longer needed), then seals in place.
  void reseal(Segment& seg, const std::uint8_t* backup, const std::function<void()>& before_seal,
              StreamRekeyStats* stats);
  void write_changed(Segment& seg) const;
  void sync() const;

  int fd_;
  ChunkLayout layout_;
  std::uint64_t total_;
  StreamRekeyKeys keys_;
  ChunkEngine& engine_;
  std::string label_;
  std::uint64_t segment_chunks_;
  HostBuffer plain_;  // the segment's plaintext between opening and sealing (the caller's thread only)
};

}  // namespace gcfs
