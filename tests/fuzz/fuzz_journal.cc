// The crash journal: a journal file whose first slot holds the fuzzer's bytes, read and recovered
// from exactly as a mount does (ChunkJournal::scan, then recover_from_journal) in a small vault
// folder with one content file, whose chunk 1 fails authentication, and a canary folder beside it.
//
// Input: one mode byte, then the slot (a 4096-byte header block, zero-padded if shorter, and the
// payload after it). Mode bit 0 rewrites the digest as a valid version 3 HMAC under the fuzz key,
// bit 1 as a valid version 2 SHA-256 (the previous release's format), when the header is in
// bounds: without that, no mutation would ever pass the digest and nothing past it would be
// reached.
//
// Properties: never crashes, never blocks; a record accepted has every field in bounds (checked
// here with 128-bit arithmetic, independently of the parser); a version 3 record has one
// spelling (re-encoding it gives the same bytes); nothing outside the vault folder changes and no
// file appears or disappears in it; every chunk of the content file that reads afterwards holds
// plaintext the file really had at that index (its current or its earlier version), or zeros only
// when a version 3 record (made with the key) said the chunk was a hole; the file never grows by
// more than one chunk.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "crypto/aes_gcm.h"
#include "crypto/cpu_engine.h"
#include "fs/chunk_journal.h"
#include "fs/content/content_file.h"
#include "fs/plain_io.h"
#include "fs/file_header.h"
#include "fs/journal_recovery.h"
#include "fs/log.h"
#include "tests/fuzz/fuzz_common.h"

using namespace gcfs;

namespace {

using Bytes = std::vector<std::uint8_t>;
constexpr std::uint32_t kChunk = 4096;
constexpr std::uint64_t kD = kChunk + kChunkOverhead;
constexpr std::uint64_t kChunks = 3;

std::uint8_t pattern(std::uint64_t i, std::uint8_t version) {
  return static_cast<std::uint8_t>((i * 151 + (i >> 9) * 7 + version * 89) | 1);
}
Bytes patterned(std::uint64_t off, std::size_t len, std::uint8_t version) {
  Bytes v(len);
  for (std::size_t i = 0; i < len; ++i) v[i] = pattern(off + i, version);
  return v;
}

void write_file(const std::string& path, const Bytes& b) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd || (!b.empty() && pwrite_full(fd.get(), b.data(), b.size(), 0) != static_cast<ssize_t>(b.size())))
    fuzz::fail("cannot write " + path);
}
Bytes read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) fuzz::fail("cannot open " + path);
  const off_t n = ::lseek(fd.get(), 0, SEEK_END);
  Bytes b(static_cast<std::size_t>(n));
  if (n && pread_full(fd.get(), b.data(), b.size(), 0) != n) fuzz::fail("cannot read " + path);
  return b;
}
std::set<std::string> list(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) fuzz::fail("cannot list " + dir);
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.insert(e->d_name);
  ::closedir(d);
  return out;
}

// Another vault's keys: its chunks fail under the fuzz vault's keys, as in the review's attack.
const KeyRing& foreign_keys() {
  static const KeyRing keys = [] {
    std::array<std::uint8_t, kMasterKeyBytes> master{};
    for (std::size_t i = 0; i < master.size(); ++i) master[i] = static_cast<std::uint8_t>(0x3C + i * 7);
    return KeyRing(master);
  }();
  return keys;
}

// Chunk k of a content file in its version `version`, sealed with a nonce fixed by (k, version).
Bytes seal_chunk(const FileId& id, std::uint64_t k, std::uint8_t version, const KeyRing& keys = fuzz::fixed_keys()) {
  const ChunkKey key = keys.content_key(id);
  std::array<std::uint8_t, kChunkNonceOnDisk> nonce{};
  nonce[0] = static_cast<std::uint8_t>(k);
  nonce[1] = version;
  const Bytes plain = patterned(k * kChunk, kChunk, version);
  Bytes out(nonce.begin(), nonce.end());
  out.resize(kChunkNonceOnDisk + kChunk);
  const auto tag = gcm_seal(key.bytes, nonce, chunk_aad(id, k), plain, out.data() + kChunkNonceOnDisk);
  out.insert(out.end(), tag.begin(), tag.end());
  return out;
}

struct Env {
  std::string root, cipher, outside, file, journal, canary;
  ChunkLayout layout{kChunk};
  CpuEngine engine{1};
  Bytes damaged;      // the content file as each run starts: chunk 1 fails authentication
  Bytes old_chunk1;   // chunk 1 as it was before its last rewrite: a genuine pre-image
  Bytes canary_bytes;
  FileId id{}, canary_id{};
  UniqueFd dir;

  ~Env() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  Env() {
    log::to_file("/dev/null");  // every skipped record is logged; keep the fuzzer's output readable
    std::string tmpl = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/gcfs-fuzz-journal-XXXXXX";
    if (!::mkdtemp(tmpl.data())) fuzz::fail("mkdtemp failed");
    root = tmpl;
    cipher = root + "/cipher";
    outside = root + "/outside";
    file = cipher + "/f";
    journal = cipher + "/" + kJournalFileName;
    canary = outside + "/canary";
    if (::mkdir(cipher.c_str(), 0700) != 0 || ::mkdir(outside.c_str(), 0700) != 0) fuzz::fail("mkdir failed");
    // The canary: a content file of another vault (another key), with a file ID a record can name.
    for (std::size_t i = 0; i < canary_id.size(); ++i) canary_id[i] = static_cast<std::uint8_t>(0xC3 + 5 * i);
    const auto canary_header = FileHeader{canary_id}.encode();
    canary_bytes.assign(canary_header.begin(), canary_header.end());
    for (std::uint64_t k = 0; k < 2; ++k) {
      const Bytes c = seal_chunk(canary_id, k, 0, foreign_keys());
      canary_bytes.insert(canary_bytes.end(), c.begin(), c.end());
    }
    write_file(canary, canary_bytes);
    // The content file, the same in every run (seeds must match it): a fixed file ID and fixed
    // nonces, three chunks of version 0, then chunk 1 rewritten as version 1 and damaged.
    for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(0x5A + 3 * i);
    const auto header = FileHeader{id}.encode();
    damaged.assign(header.begin(), header.end());
    for (std::uint64_t k = 0; k < kChunks; ++k) {
      const Bytes c = seal_chunk(id, k, k == 1 ? 1 : 0);
      damaged.insert(damaged.end(), c.begin(), c.end());
    }
    old_chunk1 = seal_chunk(id, 1, 0);
    damaged[layout.disk_offset(1) + 100] ^= 1;
    write_file(file, damaged);
    dir.reset(::open(cipher.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) fuzz::fail("cannot open the vault folder");
  }
};

Env& env() {
  static Env e;
  return e;
}

// The bounds of journal_record.h, recomputed here without any chance of wrapping.
void check_bounds(const JournalRecordHeader& h) {
  using u128 = unsigned __int128;
  const std::uint32_t per = journal_chunks_per_record(kChunk);
  if (h.chunk_size != kChunk) fuzz::fail("a record for another chunk size was accepted");
  if (h.chunk_count == 0 || h.chunk_count > per) fuzz::fail("a chunk count out of bounds was accepted");
  if (h.payload_len > journal_slot_payload_bytes(kChunk) || h.payload_len > u128{h.chunk_count} * kD ||
      h.payload_len <= u128{h.chunk_count - 1} * kD + kChunkOverhead)
    fuzz::fail("a payload length out of bounds was accepted");
  const u128 end = u128{h.base_offset} + kFileHeaderBytes + (u128{h.first_chunk} + h.chunk_count) * kD;
  const u128 max_off = static_cast<u128>(std::numeric_limits<std::int64_t>::max());
  if (end > max_off) fuzz::fail("chunk offsets past what an off_t holds were accepted");
  if (h.old_cipher_size > max_off || h.new_cipher_size > max_off) fuzz::fail("a size past an off_t was accepted");
  if (h.path.size() > kJournalMaxPathBytes) fuzz::fail("a path longer than its block was accepted");
}

// The slot as the record was written: the header block, then the payload.
Bytes slot_bytes(const Bytes& block, const Bytes& payload) {
  Bytes s = block;
  s.insert(s.end(), payload.begin(), payload.end());
  return s;
}

void seed(const std::string& name, std::uint8_t mode, JournalRecordHeader h, const Bytes& payload, bool legacy) {
  Bytes block(kJournalHeaderBlock);
  h.payload_len = payload.size();
  if (legacy)
    encode_legacy_journal_header(h, payload.data(), block.data());
  else
    encode_journal_header(h, payload.data(), fuzz::fixed_keys().journal_key(), block.data());
  Bytes in{mode};
  const Bytes s = slot_bytes(block, payload);
  in.insert(in.end(), s.begin(), s.end());
  fuzz::write_seed(name, in);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Env& e = env();
  if (!fuzz::seed_dir()) return 0;
  JournalRecordHeader h;
  h.sequence = 7;
  h.file_id = e.id;
  h.first_chunk = 1;
  h.chunk_count = 1;
  h.chunk_size = kChunk;
  h.old_cipher_size = e.damaged.size();
  h.new_cipher_size = e.damaged.size();
  h.path = "f";
  seed("v3-genuine-pre-image", 1, h, e.old_chunk1, false);
  seed("v2-genuine-pre-image", 2, h, e.old_chunk1, true);
  seed("v3-hole", 1, h, Bytes(kD, 0), false);
  seed("v2-hole", 2, h, Bytes(kD, 0), true);
  JournalRecordHeader out = h;
  out.file_id = e.canary_id;
  out.first_chunk = 0;
  out.old_cipher_size = 0;  // the previous release cut the file to this
  out.path = "../outside/canary";
  seed("v2-outside", 2, out, Bytes(kD, 0), true);
  seed("v3-outside", 1, out, Bytes(kD, 0), false);
  JournalRecordHeader two = h;
  two.first_chunk = 0;
  two.chunk_count = 2;
  two.old_cipher_size = kFileHeaderBytes + 2 * kD;  // a cut after chunk 1
  Bytes run = Bytes(e.damaged.begin() + static_cast<std::ptrdiff_t>(e.layout.disk_offset(0)),
                    e.damaged.begin() + static_cast<std::ptrdiff_t>(e.layout.disk_offset(1)));
  run.insert(run.end(), e.old_chunk1.begin(), e.old_chunk1.end());
  seed("v2-run-with-cut", 2, two, run, true);
  fuzz::write_seed("raw-empty", Bytes{0});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Env& e = env();
  const std::uint8_t mode = data[0];
  Bytes block(kJournalHeaderBlock, 0);
  std::copy(data + 1, data + 1 + std::min<std::size_t>(size - 1, block.size()), block.begin());
  Bytes payload;
  if (size - 1 > block.size()) payload.assign(data + 1 + block.size(), data + size);
  if (mode & 3) {
    if (auto h = parse_journal_header(block.data(), kChunk); h && h->payload_len <= payload.size()) {
      if (mode & 1)
        encode_journal_header(*h, payload.data(), fuzz::fixed_keys().journal_key(), block.data());
      else
        encode_legacy_journal_header(*h, payload.data(), block.data());
    }
  }

  // The parser alone: bounds, and one spelling for a version 3 record.
  if (auto h = parse_journal_header(block.data(), kChunk)) {
    check_bounds(*h);
    if (h->payload_len <= payload.size() &&
        journal_digest_ok(block.data(), *h, payload.data(), fuzz::fixed_keys().journal_key()) && !h->legacy()) {
      Bytes again(kJournalHeaderBlock);
      encode_journal_header(*h, payload.data(), fuzz::fixed_keys().journal_key(), again.data());
      if (!std::equal(again.begin(), again.begin() + static_cast<std::ptrdiff_t>(kJournalRecordHeaderBytes + h->path.size()),
                      block.begin()))
        fuzz::fail("a version 3 record has a second spelling");
    }
  }

  // The mount's recovery over it.
  write_file(e.file, e.damaged);
  write_file(e.journal, slot_bytes(block, payload));
  const JournalScan scan = ChunkJournal::scan(e.dir.get(), fuzz::fixed_keys(), kChunk);
  if (scan.records.size() > 1) fuzz::fail("one slot gave more than one record");
  bool hole_vouched = false;
  for (const auto& r : scan.records) {
    check_bounds(r);
    Bytes p;
    if (r.load_payload(&p) != 0 || p.size() != r.payload_len) fuzz::fail("an accepted record's payload does not load");
    hole_vouched = hole_vouched || !r.legacy();
  }
  recover_from_journal(e.dir.get(), e.cipher, scan.records, e.layout, fuzz::fixed_keys(), e.engine);

  if (read_file(e.canary) != e.canary_bytes) fuzz::fail("a file outside the vault folder changed");
  if (list(e.outside) != std::set<std::string>{"canary"}) fuzz::fail("the folder outside the vault changed");
  if (list(e.cipher) != std::set<std::string>{"f", kJournalFileName}) fuzz::fail("a file appeared in the vault folder");
  const Bytes after = read_file(e.file);
  if (after.size() > e.damaged.size() + kD) fuzz::fail("recovery grew the file by more than a chunk");
  UniqueFd fd(::open(e.file.c_str(), O_RDONLY | O_CLOEXEC));
  ContentFile f(fd.get(), e.layout, e.engine, fuzz::fixed_keys(), "fuzz");
  const std::int64_t psize = f.plain_size();
  if (psize < 0) return 0;  // a size that does not read: nothing more to check
  Bytes buf(kChunk);
  for (std::uint64_t k = 0; k < e.layout.chunk_count(static_cast<std::uint64_t>(psize)); ++k) {
    const std::size_t len = e.layout.chunk_plain_len(k, static_cast<std::uint64_t>(psize));
    const ssize_t n = f.read(k * kChunk, len, buf.data());
    if (n < 0) continue;
    const Bytes got(buf.begin(), buf.begin() + n);
    const Bytes v0 = patterned(k * kChunk, got.size(), 0), v1 = patterned(k * kChunk, got.size(), 1);
    const bool genuine = got == (k == 1 ? v1 : v0) || (k == 1 && got == v0);
    const bool zeros = std::all_of(got.begin(), got.end(), [](std::uint8_t b) { return b == 0; });
    if (!genuine && !(zeros && hole_vouched)) fuzz::fail("chunk " + std::to_string(k) + " reads as bytes it never held");
  }
  return 0;
}
