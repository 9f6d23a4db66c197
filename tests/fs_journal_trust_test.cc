// The crash journal against someone who can write CIPHERDIR (a sync folder, a shared disk, a
// restored backup): forged records, in the previous release's format (a SHA-256 anyone can
// compute) and in the current one with MACs made without the key, whose path hints lead out of
// CIPHERDIR ("..", an absolute path, a symlinked directory), whose chunk numbers wrap, whose
// payloads are oversized, 600 of them, a huge sparse journal, and a FIFO, socket, directory or
// symbolic link in the journal's place. Every test runs the mount's recovery (Vault::open_journal)
// with a deadline and checks that nothing outside CIPHERDIR changed (a second vault next to it,
// compared byte for byte), that nothing inside was written but a genuine pre-image, and that the
// damage is reported.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "crypto/random.h"
#include "fs/chunk_journal.h"
#include "fs/file_header.h"
#include "fs/journal_recovery.h"
#include "fs/log.h"
#include "fs/plain_io.h"
#include "fs/fsck/vault_check.h"
#include "tests/fault_support.h"
#include "tests/support/legacy_journal_record.h"

namespace gcfs {
namespace {

using Bytes = std::vector<std::uint8_t>;
using testing::TempDir;
using testing::TestVault;
namespace legacy = testing::legacy_journal;

constexpr std::uint32_t C = TestVault::kChunk;
constexpr std::uint64_t D = C + kChunkOverhead;
const std::uint64_t kSlot = ChunkJournal::slot_bytes(C);

Bytes read_range(const std::string& path, std::uint64_t off, std::size_t n) {
  Bytes b(n);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  const ssize_t got = pread_full(fd, b.data(), n, off);
  ::close(fd);
  b.resize(got < 0 ? 0 : static_cast<std::size_t>(got));
  return b;
}

void write_range(const std::string& path, std::uint64_t off, const Bytes& b) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(pwrite_full(fd, b.data(), b.size(), off), static_cast<ssize_t>(b.size()));
  ::close(fd);
}

std::uint64_t file_size(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return static_cast<std::uint64_t>(st.st_size);
}

FileId id_of(const std::string& cipher_path) {
  const Bytes h = read_range(cipher_path, 0, kFileHeaderBytes);
  std::array<std::uint8_t, kFileHeaderBytes> raw{};
  std::copy(h.begin(), h.end(), raw.begin());
  auto header = FileHeader::decode(raw, 1);
  if (!header) header = FileHeader::decode(raw, 2);  // the vault's format may be either
  EXPECT_TRUE(header.has_value()) << cipher_path;
  return header ? header->id : FileId{};
}

// Runs fn on a thread of its own and waits at most `limit`: a regression that blocks (on a FIFO)
// fails the test instead of hanging it. The thread is left behind then; unblock() is called to
// let it finish.
bool finishes_within(std::chrono::milliseconds limit, std::function<void()> fn, std::function<void()> unblock = {}) {
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  std::thread([fn = std::move(fn), done] {
    fn();
    done->set_value();
  }).detach();
  if (fut.wait_for(limit) == std::future_status::ready) return true;
  if (unblock) unblock();
  fut.wait_for(std::chrono::seconds(5));
  return false;
}

// How a forged record is made: in the previous release's format (its SHA-256 is right, since
// anyone can compute it), or in the current one with an HMAC under a key that is not the vault's,
// or with 32 random bytes for its HMAC.
enum class Forgery { Legacy, ForeignKey, RandomMac };

class JournalTrust : public ::testing::Test {
 protected:
  JournalTrust() : v(tmp / "cipher"), other(tmp / "other") {
    log::to_file(tmp / "log");
    other.write_file("/victim", testing::pattern_bytes(3 * C + 500, 1));
    victim_rel = other.cipher_rel("/victim");
    victim = other.cipher_path("/victim");
    victim_id = id_of(victim);
    canary = testing::snapshot(other.dir());
  }
  ~JournalTrust() override { log::to_stderr(); }

  std::string journal() const { return v.dir() + "/" + kJournalFileName; }
  std::string log_text() {
    auto b = testing::read_all(tmp / "log");
    return std::string(b.begin(), b.end());
  }

  // Writes a forged record into slot `slot` of CIPHERDIR/gpucryptfs.journal: its header block and
  // the payload after it.
  void plant(unsigned slot, const legacy::Fields& fields, const Bytes& payload, Forgery how) {
    Bytes block;
    if (how == Forgery::Legacy) {
      block = legacy::header_block(fields, payload);
    } else {
      JournalRecordHeader h;
      h.sequence = fields.sequence;
      h.file_id = fields.file_id;
      h.first_chunk = fields.first_chunk;
      h.chunk_count = fields.chunk_count;
      h.chunk_size = fields.chunk_size;
      h.base_offset = fields.base_offset;
      h.old_cipher_size = fields.old_cipher_size;
      h.new_cipher_size = fields.new_cipher_size;
      h.payload_len = fields.payload_len;
      h.path = fields.path;
      std::array<std::uint8_t, kMasterKeyBytes> foreign{};
      random_bytes(foreign);
      block.assign(kJournalHeaderBlock, 0);
      encode_journal_header(h, payload.data(), KeyRing(foreign).journal_key(), block.data());
      if (how == Forgery::RandomMac) random_bytes(std::span<std::uint8_t>(block.data() + kJournalDigestOffset, kJournalDigestBytes));
    }
    write_range(journal(), std::uint64_t{slot} * kSlot, block);
    if (!payload.empty()) write_range(journal(), std::uint64_t{slot} * kSlot + kJournalHeaderBlock, payload);
  }

  // A record for `count` chunks from `first` of the file with ID id at hint, whose pre-images are
  // all zero (holes): what made the previous release truncate and zero a file outside CIPHERDIR.
  static legacy::Fields zero_record(const std::string& hint, const FileId& id, std::uint64_t first,
                                    std::uint32_t count, std::uint64_t seq) {
    legacy::Fields f;
    f.sequence = seq;
    f.file_id = id;
    f.first_chunk = first;
    f.chunk_count = count;
    f.chunk_size = C;
    f.old_cipher_size = 0;
    f.new_cipher_size = std::uint64_t{1} << 40;
    f.payload_len = count * D;
    f.path = hint;
    return f;
  }

  // The mount's recovery, with a deadline: a fresh Vault opens (and recovers from) the journal.
  std::size_t mount_recovery(std::unique_ptr<Vault>* out = nullptr) {
    auto vault = Vault::open(v.dir(), Vault::load_config(v.dir()), TestVault::kPassword);
    std::size_t restored = 0;
    EXPECT_TRUE(finishes_within(std::chrono::seconds(10), [&] { restored = vault->open_journal(v.engine()); }))
        << "the mount's journal recovery did not finish";
    if (out) *out = std::move(vault);
    return restored;
  }

  TempDir tmp{"gcfs-jtrust"};
  TestVault v, other;
  std::string victim_rel, victim;
  FileId victim_id{};
  std::map<std::string, std::string> canary;
};

// The attack of the review: a record whose hint leads to a file of another vault next to this
// one. The previous release truncated that file to 0 bytes and zeroed its chunks.
TEST_F(JournalTrust, ForgedRecordsNeverActOutsideCipherdir) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; the record rules are the same in format 2";
  ASSERT_EQ(::symlink(other.dir().c_str(), (v.dir() + "/via-link").c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), (v.dir() + "/victim-link").c_str()), 0);
  const std::vector<std::string> hints = {
      "../other/" + victim_rel,  // ".." out of CIPHERDIR
      victim,                    // an absolute path
      "via-link/" + victim_rel,  // through a symlinked directory
      "victim-link",             // a symbolic link to the file itself
      "./../other/" + victim_rel,
  };
  unsigned slot = 0;
  for (Forgery how : {Forgery::Legacy, Forgery::ForeignKey, Forgery::RandomMac})
    for (const auto& hint : hints) {
      // Chunks 0..2 as holes, and a record for chunk 0 alone: both shapes the old code acted on.
      plant(slot, zero_record(hint, victim_id, 0, 3, 100 + slot), Bytes(3 * D, 0), how);
      ++slot;
    }
  ASSERT_LE(slot, kJournalMaxSlots);
  const std::size_t restored = mount_recovery();
  EXPECT_EQ(restored, 0u);
  EXPECT_TRUE(testing::snapshot(other.dir()) == canary) << "a forged record changed a file outside CIPHERDIR";
  EXPECT_EQ(file_size(victim), kFileHeaderBytes + 3 * D + 500 + kChunkOverhead);
  const std::string log = log_text();
  EXPECT_NE(log.find("would lead outside CIPHERDIR"), std::string::npos) << log;
  EXPECT_NE(log.find("symbolic link"), std::string::npos) << log;
  EXPECT_EQ(log.find("restored chunk"), std::string::npos) << log;
  EXPECT_TRUE(ChunkJournal::read_records(journal(), C, v.vault().keys()).empty())
      << "the legacy records were dealt with and invalidated";
}

// Inside CIPHERDIR a record in the previous release's format is believed only as far as the
// restored chunk proves itself: a genuine pre-image of that very chunk of that very file. Holes,
// random bytes, another file's chunk or another index of the same file are never written, and a
// forged "size before the write" never cuts into what was restored.
TEST_F(JournalTrust, ForgedRecordsInsideCipherdirWriteNothingButGenuinePreImages) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; the record rules are the same in format 2";
  v.write_file("/f", testing::pattern_bytes(4 * C, 2));
  v.write_file("/g", testing::pattern_bytes(4 * C, 3));
  const std::string f = v.cipher_path("/f"), g = v.cipher_path("/g");
  const FileId fid = id_of(f);
  const Bytes old_chunk1 = read_range(f, v.chunk_offset(1), D);  // genuine, and about to be replaced
  const Bytes g_chunk1 = read_range(g, v.chunk_offset(1), D);
  v.write_file("/f", testing::pattern_bytes(C, 4), C);  // chunk 1 rewritten: a new nonce and tag
  const Bytes f_chunk2 = read_range(f, v.chunk_offset(2), D);
  testing::flip_bit(f, v.chunk_offset(1) + 100);  // now failing: what recovery may act on
  const Bytes damaged = read_range(f, 0, file_size(f));
  const auto g_before = read_range(g, 0, file_size(g));

  auto rec = [&](const Bytes& payload, std::uint64_t seq) {
    legacy::Fields r = zero_record(v.cipher_rel("/f"), fid, 1, 1, seq);
    r.payload_len = payload.size();
    r.old_cipher_size = kFileHeaderBytes + D;  // a forged size: would cut the file into chunk 1
    return r;
  };
  Bytes noise = testing::pattern_bytes(D, 5);
  plant(0, rec(Bytes(D, 0), 60), Bytes(D, 0), Forgery::Legacy);  // a hole
  plant(1, rec(noise, 59), noise, Forgery::Legacy);               // random bytes
  plant(2, rec(g_chunk1, 58), g_chunk1, Forgery::Legacy);         // another file's chunk 1
  plant(3, rec(f_chunk2, 57), f_chunk2, Forgery::Legacy);         // this file's chunk 2 as chunk 1
  plant(4, rec(old_chunk1, 56), old_chunk1, Forgery::ForeignKey);  // genuine bytes, but a MAC without the key
  EXPECT_EQ(mount_recovery(), 0u);
  EXPECT_TRUE(read_range(f, 0, file_size(f)) == damaged) << "something not a genuine pre-image was written";
  EXPECT_TRUE(read_range(g, 0, file_size(g)) == g_before);

  // A genuine older version of chunk 1 goes back (replaying old ciphertext does no more), but the
  // forged size does not cut the file.
  plant(0, rec(old_chunk1, 70), old_chunk1, Forgery::Legacy);
  EXPECT_EQ(mount_recovery(), 1u);
  EXPECT_EQ(file_size(f), damaged.size()) << "a cut into the restored chunk";
  EXPECT_TRUE(read_range(f, v.chunk_offset(1), D) == old_chunk1);
  Bytes got;
  EXPECT_EQ(v.read("/f", C, C, &got), static_cast<ssize_t>(C));
  EXPECT_TRUE(testing::snapshot(other.dir()) == canary) << "a file outside CIPHERDIR changed";
}

// Fields out of bounds: nothing is computed from them, however right the checksum.
TEST_F(JournalTrust, RecordsWithFieldsOutOfBoundsAreNeverRead) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; the record rules are the same in format 2";
  v.write_file("/f", testing::pattern_bytes(4 * C, 6));
  const std::string f = v.cipher_path("/f");
  const FileId fid = id_of(f);
  const Bytes genuine0 = read_range(f, v.chunk_offset(0), D);
  testing::flip_bit(f, v.chunk_offset(0) + 10);
  const Bytes damaged = read_range(f, 0, file_size(f));
  const std::string rel = v.cipher_rel("/f");
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t room = ChunkJournal::slot_payload_bytes(C);

  std::vector<std::pair<std::string, legacy::Fields>> cases;
  auto add = [&](const std::string& what, auto change) {
    legacy::Fields r = zero_record(rel, fid, 0, 2, 10 + cases.size());
    r.payload_len = 2 * D;
    change(r);
    cases.emplace_back(what, r);
  };
  add("first chunk 2^64 - 1: the second chunk wraps to 0", [&](auto& r) { r.first_chunk = max; });
  add("first chunk near 2^64", [&](auto& r) { r.first_chunk = max - 1; });
  add("chunk offsets past what an off_t holds", [&](auto& r) { r.first_chunk = (max >> 1) / D; });
  add("no chunks", [&](auto& r) { r.chunk_count = 0; });
  add("2^32 - 1 chunks", [&](auto& r) { r.chunk_count = 0xffffffffu; });
  add("more chunks than a slot holds", [&](auto& r) {
    r.chunk_count = static_cast<std::uint32_t>(room / D + 1);
    r.payload_len = r.chunk_count * D;
  });
  add("a payload longer than its chunks", [&](auto& r) { r.payload_len = 2 * D + 1; });
  add("a payload longer than the slot", [&](auto& r) { r.payload_len = room + 4096; });
  add("a payload of 2^64 - 1 bytes", [&](auto& r) { r.payload_len = max; });
  add("another chunk size", [&](auto& r) { r.chunk_size = 2 * C; });
  add("chunk size 0", [&](auto& r) { r.chunk_size = 0; });
  add("a size past what an off_t holds", [&](auto& r) { r.old_cipher_size = max; });
  add("a base offset that wraps", [&](auto& r) { r.base_offset = max - 10; });
  add("a sequence number no writer reaches", [&](auto& r) { r.sequence = max; });
  add("a path longer than its block", [&](auto& r) { r.path = std::string(5000, 'a'); });
  Bytes payload = genuine0;  // a genuine chunk 0, so that only the bounds stand in the way
  payload.resize(room + 4096);
  unsigned slot = 0;
  for (const auto& [what, fields] : cases) {
    plant(slot, fields, payload, Forgery::Legacy);
    EXPECT_TRUE(ChunkJournal::read_records(journal(), C, v.vault().keys()).empty()) << what;
    ASSERT_EQ(::truncate(journal().c_str(), 0), 0);
  }
  for (const auto& [what, fields] : cases) plant(slot++, fields, payload, Forgery::Legacy);
  EXPECT_EQ(mount_recovery(), 0u);
  EXPECT_TRUE(read_range(f, 0, file_size(f)) == damaged);
  EXPECT_TRUE(testing::snapshot(other.dir()) == canary) << "a file outside CIPHERDIR changed";

  // The same record in bounds is taken: the test above fails for the bounds alone.
  ASSERT_EQ(::truncate(journal().c_str(), 0), 0);
  legacy::Fields ok = zero_record(rel, fid, 0, 1, 99);
  ok.payload_len = D;
  ok.old_cipher_size = file_size(f);
  plant(0, ok, genuine0, Forgery::Legacy);
  EXPECT_EQ(mount_recovery(), 1u);
  EXPECT_TRUE(read_range(f, v.chunk_offset(0), D) == genuine0);
}

// 600 records, each claiming a full slot of pre-images: the previous release kept every payload
// in memory (585 MB). Now at most 64 slots are read, their payloads stay on disk until used, and
// the journal's excess is reported and cut off by the mount.
TEST_F(JournalTrust, SixHundredForgedRecordsCostBoundedMemoryAndTime) {
  const std::uint32_t per = journal_chunks_per_record(C);
  const unsigned n = 600;
  for (unsigned i = 0; i < n; ++i) {
    legacy::Fields r = zero_record(i % 2 ? "no-such-file" : "../other/" + victim_rel, victim_id, 0, per, 1000 + i);
    r.payload_len = std::uint64_t{per} * D;
    // Payloads of zeros, left sparse: only the header blocks are written.
    write_range(journal(), std::uint64_t{i} * kSlot, legacy::header_block(r, Bytes(r.payload_len, 0)));
  }
  ASSERT_EQ(::truncate(journal().c_str(), static_cast<off_t>(n * kSlot)), 0);

  // In use on the heap, large (mmapped) blocks included.
  auto heap = [] {
    const struct mallinfo2 m = ::mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  const auto heap_before = heap();
  const auto t0 = std::chrono::steady_clock::now();
  std::string damage;
  auto recs = ChunkJournal::read_records(journal(), C, v.vault().keys(), &damage);
  const auto took = std::chrono::steady_clock::now() - t0;
  const auto heap_held = heap() - heap_before;
  EXPECT_EQ(recs.size(), kJournalMaxSlots) << "at most the slots a journal has";
  EXPECT_LT(heap_held, 4u << 20) << "records must not hold their payloads (64 slots of 1 MiB)";
  EXPECT_LT(took, std::chrono::seconds(2));
  EXPECT_NE(damage.find("more than its 64 slots"), std::string::npos) << damage;
  recs.clear();

  std::unique_ptr<Vault> mounted;
  EXPECT_EQ(mount_recovery(&mounted), 0u);
  ASSERT_TRUE(mounted->journal());
  EXPECT_EQ(file_size(journal()), kJournalMaxSlots * kSlot) << "cut back to its slots";
  EXPECT_TRUE(testing::snapshot(other.dir()) == canary) << "a file outside CIPHERDIR changed";
  EXPECT_NE(log_text().find("more than its 64 slots can; cut back"), std::string::npos) << log_text();
}

// A 1 TiB sparse journal delayed the previous release's mount by 5.4 s: its scan was linear in
// the file's size. Now only the first 64 slots are looked at.
TEST_F(JournalTrust, AHugeSparseJournalCostsNoTime) {
  { write_range(journal(), 0, Bytes(1, 0)); }
  if (::truncate(journal().c_str(), static_cast<off_t>(std::uint64_t{1} << 40)) != 0)
    GTEST_SKIP() << "the backing filesystem takes no 1 TiB sparse file: " << std::strerror(errno);
  auto t0 = std::chrono::steady_clock::now();
  std::string damage;
  EXPECT_TRUE(ChunkJournal::read_records(journal(), C, v.vault().keys(), &damage).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_NE(damage.find("more than its 64 slots"), std::string::npos) << damage;
  t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Vault> mounted;
  EXPECT_EQ(mount_recovery(&mounted), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_TRUE(mounted->journal());
  EXPECT_EQ(file_size(journal()), kJournalMaxSlots * kSlot);
}

// A journal with a second name: a hard link to a file outside CIPHERDIR. The mount would write
// records into it and cut it back to 64 slots; it is refused instead, and the file is untouched.
TEST_F(JournalTrust, AJournalHardLinkedToAFileOutsideIsRefused) {
  const std::string outside = tmp / "outside-big";
  write_range(outside, 0, testing::pattern_bytes(4096, 8));
  ASSERT_EQ(::truncate(outside.c_str(), static_cast<off_t>((kJournalMaxSlots + 1) * kSlot)), 0);
  if (::link(outside.c_str(), journal().c_str()) != 0) GTEST_SKIP() << "no hard links here: " << std::strerror(errno);
  const auto before = testing::read_all(outside);
  std::unique_ptr<Vault> mounted;
  EXPECT_EQ(mount_recovery(&mounted), 0u);
  EXPECT_FALSE(mounted->journal());
  EXPECT_NE(log_text().find("has 2 hard links"), std::string::npos) << log_text();
  EXPECT_NE(log_text().find("mounted without its crash journal"), std::string::npos) << log_text();
  EXPECT_TRUE(testing::read_all(outside) == before) << "a file outside CIPHERDIR changed";
}

// Something other than a regular file where the journal belongs: reported, never waited on, never
// followed; the mount goes on without its journal and says so.
TEST_F(JournalTrust, AJournalOfAnotherShapeIsReportedAndNeverWaitedOn) {
  const std::string outside = tmp / "outside-file";
  write_range(outside, 0, testing::pattern_bytes(3 * kSlot, 7));
  const auto outside_before = testing::read_all(outside);
  struct Shape {
    const char* what;
    std::function<void(const std::string&)> make;
  };
  const std::vector<Shape> shapes = {
      {"FIFO", [](const std::string& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0); }},
      {"directory", [](const std::string& p) { ASSERT_EQ(::mkdir(p.c_str(), 0700), 0); }},
      {"symbolic link", [&](const std::string& p) { ASSERT_EQ(::symlink(outside.c_str(), p.c_str()), 0); }},
      {"symbolic link", [](const std::string& p) { ASSERT_EQ(::symlink("nowhere", p.c_str()), 0); }},
      {"socket",
       [](const std::string& p) {
         sockaddr_un addr{};
         addr.sun_family = AF_UNIX;
         ASSERT_LT(p.size(), sizeof addr.sun_path);
         std::strcpy(addr.sun_path, p.c_str());
         int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
         ASSERT_GE(s, 0);
         ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
         ::close(s);
       }},
  };
  for (const auto& shape : shapes) {
    SCOPED_TRACE(shape.what);
    std::filesystem::remove_all(journal());
    shape.make(journal());
    // A writer for a FIFO, should a regression block on it.
    auto unblock = [&] { ::close(::open(journal().c_str(), O_WRONLY | O_NONBLOCK)); };
    UniqueFd dir(::open(v.dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    JournalScan s;
    ASSERT_TRUE(finishes_within(std::chrono::seconds(5), [&] { s = ChunkJournal::scan(dir.get(), v.vault().keys(), C); },
                                unblock));
    EXPECT_TRUE(s.records.empty());
    EXPECT_NE(s.damage.find(shape.what), std::string::npos) << s.damage;
    std::string damage;
    ASSERT_TRUE(finishes_within(std::chrono::seconds(5),
                                [&] { (void)ChunkJournal::read_records(journal(), C, v.vault().keys(), &damage); },
                                unblock));
    EXPECT_NE(damage.find(shape.what), std::string::npos) << damage;

    ::truncate((tmp / "log").c_str(), 0);
    auto vault = Vault::open(v.dir(), Vault::load_config(v.dir()), TestVault::kPassword);
    ASSERT_TRUE(finishes_within(std::chrono::seconds(5), [&] { vault->open_journal(v.engine()); }, unblock));
    EXPECT_FALSE(vault->journal());
    const std::string log = log_text();
    EXPECT_NE(log.find(std::string(kJournalFileName) + " is "), std::string::npos) << log;
    EXPECT_NE(log.find(shape.what), std::string::npos) << log;
    EXPECT_NE(log.find("mounted without its crash journal"), std::string::npos) << log;

    // fsck, with --repair, reads the journal through the same calls: it finishes too, and says why
    // the journal was not read.
    ::truncate((tmp / "log").c_str(), 0);
    FsckOptions repair;
    repair.repair = true;
    FsckReport report;
    ASSERT_TRUE(finishes_within(std::chrono::seconds(5), [&] { report = check_vault(*vault, v.engine(), repair); },
                                unblock));
    std::string problems;
    for (const auto& p : report.problems) problems += p.cipher_path + ": " + p.what + "\n";
    EXPECT_NE(problems.find(std::string(kJournalFileName) + ": crash journal"), std::string::npos) << problems;
    EXPECT_NE(problems.find(shape.what), std::string::npos) << problems;
  }
  EXPECT_EQ(testing::read_all(outside), outside_before);
  EXPECT_TRUE(testing::snapshot(other.dir()) == canary) << "a file outside CIPHERDIR changed";
}

}  // namespace
}  // namespace gcfs
