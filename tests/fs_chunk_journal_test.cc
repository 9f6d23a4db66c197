// The crash journal (fs/chunk_journal.h) and its recovery (fs/journal_recovery.h) on real files:
// records written, read back, checksummed, invalidated and their slots reused; which rewrites
// ContentFile journals; and the tear a SIGKILL leaves, simulated exactly: the record stays valid
// (its invalidation never happened) and the chunk on disk is a mix of new and old pages. Reopening
// the vault restores the chunk, never touches a chunk that authenticates, and ignores torn records.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fs/chunk_journal.h"
#include "fs/content/content_file.h"
#include "fs/plain_io.h"
#include "fs/file_lock.h"
#include "fs/file_header.h"
#include "fs/journal_recovery.h"
#include "fs/log.h"
#include "fs/fsck/vault_check.h"
#include "tests/fault_support.h"
#include "tests/support/legacy_journal_record.h"

namespace gcfs {
namespace {

using Bytes = std::vector<std::uint8_t>;
using testing::TempDir;
using testing::TestVault;

constexpr std::uint32_t C = TestVault::kChunk;
constexpr std::uint64_t D = C + kChunkOverhead;

FileId some_id(std::uint8_t seed) {
  FileId id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(seed + i);
  return id;
}

Bytes read_range(const std::string& path, std::uint64_t off, std::size_t n) {
  Bytes b(n);
  int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  const ssize_t got = pread_full(fd, b.data(), n, off);
  ::close(fd);
  b.resize(got < 0 ? 0 : static_cast<std::size_t>(got));
  return b;
}

void write_range(const std::string& path, std::uint64_t off, const Bytes& b) {
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite_full(fd, b.data(), b.size(), off), static_cast<ssize_t>(b.size()));
  ::close(fd);
}

std::uint64_t file_size(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return static_cast<std::uint64_t>(st.st_size);
}

// ---------------------------------------------------------------------------------------------
// Records.

// The pre-images a record holds, read from the journal.
Bytes payload_of(const JournalRecord& r) {
  Bytes b;
  EXPECT_EQ(r.load_payload(&b), 0);
  return b;
}

KeyRing test_keys(std::uint8_t seed = 1) {
  std::array<std::uint8_t, kMasterKeyBytes> master{};
  for (std::size_t i = 0; i < master.size(); ++i) master[i] = static_cast<std::uint8_t>(seed * 31 + i);
  return KeyRing(master);
}

class JournalRecords : public ::testing::Test {
 protected:
  std::unique_ptr<ChunkJournal> open_journal(bool* busy = nullptr) {
    std::string err;
    auto j = ChunkJournal::open(dir.get(), tmp.path(), keys, C, 8, &err, busy);
    if (!busy) {
      EXPECT_TRUE(j) << err;
    }
    return j;
  }
  std::vector<JournalRecord> records() { return ChunkJournal::read_records(path, C, keys); }

  TempDir tmp{"gcfs-journal"};
  std::string path = tmp / kJournalFileName;
  UniqueFd dir{::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  KeyRing keys = test_keys();
};

TEST_F(JournalRecords, RecordReadsBackWithEveryFieldUntilInvalidated) {
  auto j = open_journal();
  ASSERT_TRUE(j);
  EXPECT_EQ(file_size(path), 0u) << "the journal takes no room until a write is journaled";
  const Bytes payload = testing::pattern_bytes(D + 1000 + kChunkOverhead, 1);  // a whole chunk, then a partial one
  ChunkJournal::Pending p;
  ASSERT_EQ(j->record(some_id(7), 5, 2, 0, 123456, 130000, "dir/file", payload.data(), payload.size(), &p), 0);
  EXPECT_TRUE(p.active());
  EXPECT_EQ(file_size(path), kJournalHeaderBlock + payload.size()) << "one record in the lowest slot, nothing beyond";
  EXPECT_EQ(j->slots_in_use(), 1u);

  auto recs = records();
  ASSERT_EQ(recs.size(), 1u);
  const JournalRecord& r = recs[0];
  EXPECT_EQ(r.file_id, some_id(7));
  EXPECT_EQ(r.first_chunk, 5u);
  EXPECT_EQ(r.chunk_count, 2u);
  EXPECT_EQ(r.chunk_size, C);
  EXPECT_EQ(r.base_offset, 0u);
  EXPECT_EQ(r.old_cipher_size, 123456u);
  EXPECT_EQ(r.new_cipher_size, 130000u);
  EXPECT_EQ(r.path, "dir/file");
  EXPECT_TRUE(payload_of(r) == payload);
  EXPECT_GT(r.sequence, 0u);

  p.release();  // the in-place write is done
  EXPECT_TRUE(records().empty()) << "an invalidated record must not read back";
  EXPECT_EQ(j->slots_in_use(), 0u);
  // Invalidation zeros the magic and nothing else.
  EXPECT_TRUE(read_range(path, 0, 8) == Bytes(8, 0));
}

TEST_F(JournalRecords, TornOrDamagedRecordsAreIgnored) {
  auto j = open_journal();
  ASSERT_TRUE(j);
  const Bytes payload = testing::pattern_bytes(2 * D, 2);
  ChunkJournal::Pending p;
  ASSERT_EQ(j->record(some_id(1), 0, 2, 0, 0, 0, "f", payload.data(), payload.size(), &p), 0);
  ASSERT_EQ(records().size(), 1u);
  // A record whose payload the kill cut short: the second half still holds what was there before.
  const Bytes saved = read_range(path, kJournalHeaderBlock + D, D);
  write_range(path, kJournalHeaderBlock + D, Bytes(D, 0));
  EXPECT_TRUE(records().empty()) << "a torn payload must fail the HMAC";
  write_range(path, kJournalHeaderBlock + D, saved);
  ASSERT_EQ(records().size(), 1u);
  // A damaged header field (here: the first chunk index).
  Bytes b = read_range(path, 47, 1);
  b[0] ^= 1;
  write_range(path, 47, b);
  EXPECT_TRUE(records().empty()) << "a damaged header must fail the HMAC";
  b[0] ^= 1;
  write_range(path, 47, b);
  EXPECT_EQ(records().size(), 1u);
}

std::string hex(const std::uint8_t* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += digits[p[i] >> 4], s += digits[p[i] & 15];
  return s;
}

// The version 3 record pinned byte for byte: its key (HKDF-SHA256 of the master key with its own
// label) and its HMAC (over bytes 0..87, the path, and each chunk's nonce and tag), both computed
// independently of this code (Python's hmac and hashlib, from docs/FORMAT.md). A change to
// either would leave every journal of an earlier build unreadable.
// The record of FORMAT.md's worked example, whose digest the two tests below pin.
JournalRecordHeader documented_record() {
  JournalRecordHeader h;
  h.sequence = 5;
  for (std::size_t i = 0; i < h.file_id.size(); ++i) h.file_id[i] = static_cast<std::uint8_t>(0xA0 + i);
  h.first_chunk = 3;
  h.chunk_count = 1;
  h.chunk_size = 4096;
  h.old_cipher_size = 100000;
  h.new_cipher_size = 110000;
  h.payload_len = 4096 + kChunkOverhead;
  h.path = "dir/file";
  return h;
}
Bytes documented_payload(const JournalRecordHeader& h) {
  Bytes payload(h.payload_len, 0);
  std::fill(payload.begin(), payload.begin() + 12, 0x11);
  std::fill(payload.end() - 16, payload.end(), 0x22);
  return payload;
}

TEST(JournalFormat, Version3RecordMatchesTheDocumentedHmac) {
  std::array<std::uint8_t, kMasterKeyBytes> master{};
  for (std::size_t i = 0; i < master.size(); ++i) master[i] = static_cast<std::uint8_t>(i);
  const KeyRing keys(master);
  EXPECT_EQ(hex(keys.journal_key().data(), 32), "4cd40b92e9527803c9a4fa513711e025a7fe6098841d8e63e34be89957463b85");
  JournalRecordHeader h = documented_record();
  const Bytes payload = documented_payload(h);
  Bytes block(kJournalHeaderBlock);
  encode_journal_header(h, payload.data(), keys.journal_key(), block.data());
  EXPECT_EQ(hex(block.data() + 8, 2), "0003");
  EXPECT_EQ(hex(block.data() + kJournalDigestOffset, kJournalDigestBytes),
            "3b0a4d0976816a18e57994b445a5e1b21f65680f20ab1fd1731c1ab22bea191c");
  auto parsed = parse_journal_header(block.data(), 4096);
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(journal_digest_ok(block.data(), *parsed, payload.data(), keys.journal_key()));
  EXPECT_FALSE(parsed->legacy());
}

// The journal's keyed MAC (one keying, a context per lane reused for every record) writes the same
// pinned digest as keying from scratch: for each of many records in a row and from threads at once
// (a lane each), so that no state of one record's digest leaks into the next one's.
TEST(JournalFormat, TheJournalsKeyedMacGivesThePinnedDigestEveryTime) {
  std::array<std::uint8_t, kMasterKeyBytes> master{};
  for (std::size_t i = 0; i < master.size(); ++i) master[i] = static_cast<std::uint8_t>(i);
  const KeyRing keys(master);
  const JournalMac mac(keys.journal_key(), 4);
  JournalRecordHeader h = documented_record();
  const Bytes payload = documented_payload(h);
  const std::string pinned = "3b0a4d0976816a18e57994b445a5e1b21f65680f20ab1fd1731c1ab22bea191c";
  auto digest_of = [&](const JournalRecordHeader& rec, unsigned lane = 0) {
    Bytes block(kJournalHeaderBlock);
    encode_journal_header(rec, payload.data(), mac, lane, block.data());
    return hex(block.data() + kJournalDigestOffset, kJournalDigestBytes);
  };
  JournalRecordHeader other = h;
  other.sequence = 6;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(digest_of(h), pinned);
    EXPECT_NE(digest_of(other), pinned);
  }
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (unsigned t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i)
        if (digest_of(i % 2 ? other : h, t) == pinned ? i % 2 != 0 : i % 2 == 0) ++wrong;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  // And what the journal writes is what a reader keyed from scratch accepts.
  Bytes block(kJournalHeaderBlock);
  encode_journal_header(other, payload.data(), mac, 3, block.data());
  auto parsed = parse_journal_header(block.data(), 4096);
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(journal_digest_ok(block.data(), *parsed, payload.data(), keys.journal_key()));
}

// The HMAC key comes from the vault's master key: a record written under another vault's key (or
// copied from another vault's journal) is not a record of this one.
TEST_F(JournalRecords, RecordsUnderAnotherVaultsKeyAreIgnored) {
  auto j = open_journal();
  ASSERT_TRUE(j);
  const Bytes payload = testing::pattern_bytes(D, 21);
  ChunkJournal::Pending p;
  ASSERT_EQ(j->record(some_id(1), 0, 1, 0, 0, 0, "f", payload.data(), payload.size(), &p), 0);
  ASSERT_EQ(records().size(), 1u);
  EXPECT_TRUE(ChunkJournal::read_records(path, C, test_keys(2)).empty());
  const JournalScan s = ChunkJournal::scan(dir.get(), test_keys(2), C);
  EXPECT_TRUE(s.records.empty());
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_TRUE(s.damage.empty()) << s.damage;
}

// Pre-images are read when recovery needs them, and only if the slot still holds the record that
// was checked: a payload changed in between is not used.
TEST_F(JournalRecords, APayloadChangedAfterTheScanIsNotLoaded) {
  auto j = open_journal();
  ASSERT_TRUE(j);
  const Bytes payload = testing::pattern_bytes(2 * D, 22);
  ChunkJournal::Pending p;
  ASSERT_EQ(j->record(some_id(1), 0, 2, 0, 0, 0, "f", payload.data(), payload.size(), &p), 0);
  auto recs = records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(payload_of(recs[0]) == payload);
  testing::flip_bit(path, kJournalHeaderBlock + 2 * D - 1);  // the second chunk's tag
  Bytes b;
  EXPECT_EQ(recs[0].load_payload(&b), -EBADMSG);
  testing::flip_bit(path, kJournalHeaderBlock + 2 * D - 1);
  EXPECT_EQ(recs[0].load_payload(&b), 0);
  testing::flip_bit(path, 60);  // a header field (the base offset)
  EXPECT_EQ(recs[0].load_payload(&b), -EBADMSG);
}

TEST_F(JournalRecords, SlotsAreReusedAndConcurrentWritesGetTheirOwn) {
  auto j = open_journal();
  ASSERT_TRUE(j);
  const Bytes payload = testing::pattern_bytes(D, 3);
  std::uint64_t last_seq = 0;
  for (int i = 0; i < 3; ++i) {
    ChunkJournal::Pending p;
    ASSERT_EQ(j->record(some_id(2), static_cast<std::uint64_t>(i), 1, 0, 0, 0, "f", payload.data(), payload.size(), &p), 0);
    auto recs = records();
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0].slot, 0u) << "a freed slot is taken again first";
    EXPECT_GT(recs[0].sequence, last_seq);
    last_seq = recs[0].sequence;
  }
  ChunkJournal::Pending a, b;
  ASSERT_EQ(j->record(some_id(3), 0, 1, 0, 0, 0, "a", payload.data(), payload.size(), &a), 0);
  ASSERT_EQ(j->record(some_id(4), 0, 1, 0, 0, 0, "b", payload.data(), payload.size(), &b), 0);
  auto recs = records();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_NE(recs[0].slot, recs[1].slot);
  EXPECT_EQ(recs[0].path, "b") << "newest first";
  a.release();
  recs = records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].path, "b");

  // More writers than slots: the ninth waits until one is given back.
  std::vector<ChunkJournal::Pending> held(7);
  for (auto& h : held) ASSERT_EQ(j->record(some_id(5), 0, 1, 0, 0, 0, "x", payload.data(), payload.size(), &h), 0);
  EXPECT_EQ(j->slots_in_use(), 8u);
  std::atomic<bool> got{false};
  std::thread t([&] {
    ChunkJournal::Pending p;
    EXPECT_EQ(j->record(some_id(6), 0, 1, 0, 0, 0, "y", payload.data(), payload.size(), &p), 0);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  held[0].release();
  t.join();
  EXPECT_TRUE(got.load());
}

// The path hint of a descriptor: its file relative to CIPHERDIR, following renames; empty once the
// file is deleted or for a file elsewhere; and in a child forked after a first use, the child's
// own descriptor (the /proc/self/fd kept open by the parent lists the parent's).
TEST_F(JournalRecords, PathHintsNameTheDescriptorsFileInThisProcess) {
  auto j = open_journal();
  const std::string sub = tmp.path() + "/sub";
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  int a = ::open((sub + "/a").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(a, 0);
  EXPECT_EQ(j->hint_for_fd(a), "sub/a");
  ASSERT_EQ(::rename((sub + "/a").c_str(), (sub + "/b").c_str()), 0);
  EXPECT_EQ(j->hint_for_fd(a), "sub/b");
  int c = ::open((sub + "/c").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(c, 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Descriptor number a now names c in this process only.
    ::_exit(::dup2(c, a) == a && j->hint_for_fd(a) == "sub/c" ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's hint named the parent's file";
  EXPECT_EQ(j->hint_for_fd(a), "sub/b");
  ASSERT_EQ(::unlink((sub + "/b").c_str()), 0);
  EXPECT_EQ(j->hint_for_fd(a), "");
  int outside = ::open("/dev/null", O_RDONLY);
  EXPECT_EQ(j->hint_for_fd(outside), "");
  for (int fd : {a, c, outside}) ::close(fd);
}

TEST_F(JournalRecords, LongRunsAreSplitOverSlots) {
  auto j = open_journal();
  ASSERT_TRUE(j);
  const std::uint32_t per = j->chunks_per_record();
  EXPECT_EQ(per, ChunkJournal::slot_payload_bytes(C) / D);
  const std::uint32_t n = per + 3;
  const Bytes payload = testing::pattern_bytes(n * D, 4);
  ChunkJournal::Pending p;
  ASSERT_EQ(j->record(some_id(8), 10, n, 0, 0, 0, "f", payload.data(), payload.size(), &p), 0);
  auto recs = records();
  ASSERT_EQ(recs.size(), 2u);
  std::sort(recs.begin(), recs.end(), [](auto& a, auto& b) { return a.first_chunk < b.first_chunk; });
  EXPECT_EQ(recs[0].first_chunk, 10u);
  EXPECT_EQ(recs[0].chunk_count, per);
  EXPECT_EQ(recs[1].first_chunk, 10u + per);
  EXPECT_EQ(recs[1].chunk_count, 3u);
  Bytes joined = payload_of(recs[0]);
  const Bytes second = payload_of(recs[1]);
  joined.insert(joined.end(), second.begin(), second.end());
  EXPECT_TRUE(joined == payload);
  // A run longer than all slots together is refused (the write then goes unprotected).
  const std::uint32_t too_many = per * 9;
  Bytes big(static_cast<std::size_t>(too_many) * D, 1);
  ChunkJournal::Pending q;
  EXPECT_EQ(j->record(some_id(9), 0, too_many, 0, 0, 0, "f", big.data(), big.size(), &q), -E2BIG);
}

// A daemon that was just unmounted may hold the journal for a moment while it exits; a mount
// started right after waits for it instead of running without a journal.
TEST_F(JournalRecords, AJournalReleasedWithinTheGraceIsTaken) {
  auto first = open_journal();
  ASSERT_TRUE(first);
  std::thread exiting([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    first.reset();
  });
  bool busy = true;
  auto second = open_journal(&busy);
  exiting.join();
  EXPECT_TRUE(second);
  EXPECT_FALSE(busy);
}

TEST(FileLock, ALockHeldBeyondTheGraceIsReportedBusyAndSharedLocksShare) {
  TempDir tmp{"gcfs-lock"};
  const std::string path = tmp / "f";
  const int a = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600), b = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_EQ(flock_with_grace(a, LOCK_EX, std::chrono::milliseconds(0)), 0);
  EXPECT_EQ(flock_with_grace(b, LOCK_EX, std::chrono::milliseconds(100)), EWOULDBLOCK);
  EXPECT_EQ(flock_with_grace(b, LOCK_SH, std::chrono::milliseconds(100)), EWOULDBLOCK);
  ::close(a);
  EXPECT_EQ(flock_with_grace(b, LOCK_SH, std::chrono::milliseconds(0)), 0);
  const int c = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_EQ(flock_with_grace(c, LOCK_SH, std::chrono::milliseconds(0)), 0);
  EXPECT_EQ(flock_with_grace(c, LOCK_EX, std::chrono::milliseconds(0)), EWOULDBLOCK);
  ::close(b);
  ::close(c);
}

TEST_F(JournalRecords, OneProcessAtATimeAndSequencesKeepRising) {
  std::uint64_t seq = 0;
  {
    auto j = open_journal();
    ASSERT_TRUE(j);
    bool busy = false;
    auto second = open_journal(&busy);
    EXPECT_FALSE(second);
    EXPECT_TRUE(busy);
    const Bytes payload = testing::pattern_bytes(D, 5);
    ChunkJournal::Pending p;
    ASSERT_EQ(j->record(some_id(1), 0, 1, 0, 0, 0, "f", payload.data(), payload.size(), &p), 0);
    seq = records().at(0).sequence;
  }
  auto j = open_journal();
  ASSERT_TRUE(j);
  const Bytes payload = testing::pattern_bytes(D, 6);
  ChunkJournal::Pending p;
  ASSERT_EQ(j->record(some_id(1), 0, 1, 0, 0, 0, "f", payload.data(), payload.size(), &p), 0);
  EXPECT_GT(records().at(0).sequence, seq);
}

// ---------------------------------------------------------------------------------------------
// ContentFile and recovery in a real vault.

class JournalRecovery : public ::testing::Test {
 protected:
  // format: 0 takes GPUCRYPTFS_TEST_FORMAT (fault_support.h); the tears these tests make by hand
  // are format 1's byte positions, so under format 2 they skip (JournalRecoveryV2 below tears
  // format 2 files).
  explicit JournalRecovery(int format = 0) : v(tmp / "cipher", format) {
    log::to_file(tmp / "log");
    // The "daemon": a vault of its own with the journal open (and locked).
    writer = Vault::open(v.dir(), Vault::load_config(v.dir()), TestVault::kPassword);
    writer->open_journal(v.engine());
  }
  ~JournalRecovery() override { log::to_stderr(); }

  std::string log_text() {
    auto b = testing::read_all(tmp / "log");
    return std::string(b.begin(), b.end());
  }
  std::string journal() const { return v.dir() + "/" + kJournalFileName; }

  // Writes through a ContentFile that journals, as the daemon's would.
  void write(const std::string& plain, std::uint64_t off, const Bytes& data) {
    const std::string p = v.cipher_path(plain);
    int fd = ::open(p.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ContentFile f(fd, v.vault().layout(), v.engine(), v.vault().keys(), p, writer->journal());
    ASSERT_GE(f.plain_size(), 0);
    ASSERT_EQ(f.write(off, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ::close(fd);
  }

  // The crash: the record's invalidation never happened. It only zeroed the magic, so writing
  // the magic back restores the record exactly as the daemon left it before the in-place write.
  void undo_invalidation(unsigned slot = 0) {
    const std::string magic = "GCFSJRNL";
    write_range(journal(), std::uint64_t{slot} * ChunkJournal::slot_bytes(C), Bytes(magic.begin(), magic.end()));
  }

  // "Remount": a fresh Vault object opens the journal, which recovers.
  std::size_t reopen() {
    writer.reset();  // the daemon is gone, and with it the journal's lock
    v2 = Vault::open(v.dir(), Vault::load_config(v.dir()), TestVault::kPassword);
    return v2->open_journal(v.engine());
  }

  ssize_t read(const std::string& plain, std::uint64_t off, std::size_t len, Bytes* out) { return v.read(plain, off, len, out); }

  TempDir tmp{"gcfs-journal"};
  TestVault v;
  std::unique_ptr<Vault> writer, v2;
};

TEST_F(JournalRecovery, OnlyChunksThatMayHoldDurableDataAreJournaled) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; JournalRecoveryV2 covers format 2";
  v.write_file("/f", testing::pattern_bytes(3 * C + 100, 1));  // one file, "fsynced" (it existed at open)
  const std::string p = v.cipher_path("/f");
  const std::string jp = journal();
  // Appends to a file that was created in the same session: nothing durable, nothing journaled.
  int fd = ::open(p.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ContentFile f(fd, v.vault().layout(), v.engine(), v.vault().keys(), p, writer->journal());
  ASSERT_EQ(f.truncate(0), 0);
  EXPECT_EQ(f.durable_size(), 0u);
  const Bytes a = testing::pattern_bytes(10000, 2);
  ASSERT_EQ(f.write(0, a.data(), a.size()), static_cast<ssize_t>(a.size()));
  ASSERT_EQ(f.write(2000, a.data(), 100), 100);  // a rewrite of chunks written since the last fsync
  EXPECT_TRUE(file_size(jp) == 0 || read_range(jp, 0, kJournalHeaderBlock) == Bytes(kJournalHeaderBlock, 0))
      << "nothing may be journaled yet";
  // After fsync: the next append rewrites the partial last chunk (2), which is journaled alone.
  f.mark_durable();
  EXPECT_EQ(f.durable_size(), 10000u);
  ASSERT_EQ(f.write(10000, a.data(), 5000), 5000);
  const Bytes h = read_range(jp, 0, kJournalRecordHeaderBytes);
  EXPECT_TRUE(Bytes(h.begin(), h.begin() + 8) == Bytes(8, 0)) << "the record is invalidated once the write is done";
  undo_invalidation();
  auto recs = ChunkJournal::read_records(jp, C, v.vault().keys());
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].first_chunk, 2u);
  EXPECT_EQ(recs[0].chunk_count, 1u);
  EXPECT_EQ(payload_of(recs[0]).size(), 10000 - 2 * C + kChunkOverhead) << "the pre-image is the partial chunk as it was";
  EXPECT_EQ(recs[0].path, v.cipher_rel("/f"));
  EXPECT_EQ(recs[0].old_cipher_size, kFileHeaderBytes + 2 * D + (10000 - 2 * C) + kChunkOverhead);
  EXPECT_EQ(recs[0].new_cipher_size, file_size(p));
  // Truncation lowers what counts as durable.
  ASSERT_EQ(f.truncate(5000), 0);
  EXPECT_EQ(f.durable_size(), 5000u);
  ::close(fd);
}

TEST_F(JournalRecovery, AnAppendTornByTheKillIsRolledBackToTheFsyncedChunk) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; JournalRecoveryV2 covers format 2";
  const Bytes before = testing::pattern_bytes(2 * C + 1808, 3);  // chunk 2 is partial
  v.write_file("/f", before);
  const std::string p = v.cipher_path("/f");
  const std::uint64_t old_size = file_size(p);
  write("/f", before.size(), testing::pattern_bytes(6000, 4));  // rewrites chunk 2, adds chunk 3
  undo_invalidation();
  // The tear: generic_perform_write stopped at a page boundary inside the new chunk 2, leaving
  // the file that long (it had grown page by page).
  const std::uint64_t torn_size = 12288;
  ASSERT_GT(torn_size, old_size);
  ASSERT_LT(torn_size, v.chunk_offset(2) + D);
  ASSERT_EQ(::truncate(p.c_str(), static_cast<off_t>(torn_size)), 0);
  Bytes got;
  EXPECT_EQ(read("/f", 0, before.size(), &got), -EIO) << "the torn chunk must fail before recovery";

  EXPECT_EQ(reopen(), 1u);
  EXPECT_EQ(file_size(p), old_size) << "cut back to the size before the torn write";
  ASSERT_EQ(read("/f", 0, before.size() + 100, &got), static_cast<ssize_t>(before.size()));
  EXPECT_TRUE(got == before) << "the fsynced bytes must read back exactly";
  EXPECT_NE(log_text().find("restored chunk 2 of " + p + " from the crash journal"), std::string::npos) << log_text();
  EXPECT_TRUE(ChunkJournal::read_records(journal(), C, v.vault().keys()).empty()) << "recovery invalidates what it dealt with";
  EXPECT_TRUE(check_vault(*v2, v.engine()).clean());
}

// A journal the previous release left behind (record version 2, checked by a plain SHA-256) is
// still recovered after an upgrade. The record is rewritten here byte for byte as that release
// wrote it (tests/support/legacy_journal_record.h, a copy of its encoder).
TEST_F(JournalRecovery, AJournalLeftByThePreviousReleaseStillRecovers) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; JournalRecoveryV2 covers format 2";
  const Bytes before = testing::pattern_bytes(2 * C + 1808, 23);  // chunk 2 is partial
  v.write_file("/f", before);
  const std::string p = v.cipher_path("/f");
  const std::uint64_t old_size = file_size(p);
  write("/f", before.size(), testing::pattern_bytes(6000, 24));
  undo_invalidation();
  auto recs = ChunkJournal::read_records(journal(), C, v.vault().keys());
  ASSERT_EQ(recs.size(), 1u);
  ASSERT_FALSE(recs[0].legacy());
  const Bytes payload = payload_of(recs[0]);
  testing::legacy_journal::Fields f;
  f.sequence = recs[0].sequence;
  f.file_id = recs[0].file_id;
  f.first_chunk = recs[0].first_chunk;
  f.chunk_count = recs[0].chunk_count;
  f.chunk_size = recs[0].chunk_size;
  f.base_offset = recs[0].base_offset;
  f.old_cipher_size = recs[0].old_cipher_size;
  f.new_cipher_size = recs[0].new_cipher_size;
  f.payload_len = recs[0].payload_len;
  f.path = recs[0].path;
  const Bytes legacy = testing::legacy_journal::header_block(f, payload);
  // The encoder the fuzz target and the docs rely on writes the very same bytes.
  Bytes ours(kJournalHeaderBlock);
  encode_legacy_journal_header(recs[0], payload.data(), ours.data());
  EXPECT_TRUE(ours == legacy);
  write_range(journal(), 0, legacy);
  recs = ChunkJournal::read_records(journal(), C, v.vault().keys());
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(recs[0].legacy());

  ASSERT_EQ(::truncate(p.c_str(), 12288), 0);  // the tear, as in the test above
  EXPECT_EQ(reopen(), 1u);
  EXPECT_EQ(file_size(p), old_size);
  Bytes got;
  ASSERT_EQ(read("/f", 0, before.size() + 100, &got), static_cast<ssize_t>(before.size()));
  EXPECT_TRUE(got == before);
  const std::string log = log_text();
  EXPECT_NE(log.find("restored chunk 2 of " + p + " from the crash journal"), std::string::npos) << log;
  EXPECT_NE(log.find("in the previous release's format"), std::string::npos) << log;
  EXPECT_TRUE(ChunkJournal::read_records(journal(), C, v.vault().keys()).empty());
}

TEST_F(JournalRecovery, ATornRewriteInsideTheFileRestoresOnlyTheChunkThatFails) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; JournalRecoveryV2 covers format 2";
  const Bytes before = testing::pattern_bytes(6 * C, 5);
  v.write_file("/f", before);
  const std::string p = v.cipher_path("/f");
  const Bytes pre_crash = read_range(p, 0, file_size(p));
  const Bytes patch = testing::pattern_bytes(C, 6);
  write("/f", 2 * C + 100, patch);  // chunks 2 and 3
  undo_invalidation();
  auto recs = ChunkJournal::read_records(journal(), C, v.vault().keys());
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].first_chunk, 2u);
  EXPECT_EQ(recs[0].chunk_count, 2u);
  // The tear: the pages from the middle of chunk 3 on still hold the old bytes.
  const std::uint64_t cut = (v.chunk_offset(3) + D / 2 + 4095) / 4096 * 4096;
  ASSERT_GT(cut, v.chunk_offset(3));
  ASSERT_LT(cut, v.chunk_offset(4));
  write_range(p, cut, Bytes(pre_crash.begin() + static_cast<std::ptrdiff_t>(cut),
                            pre_crash.begin() + static_cast<std::ptrdiff_t>(v.chunk_offset(4))));
  const Bytes chunk2_new = read_range(p, v.chunk_offset(2), D);

  EXPECT_EQ(reopen(), 1u);
  EXPECT_TRUE(read_range(p, v.chunk_offset(2), D) == chunk2_new)
      << "chunk 2 authenticates (the write finished it): recovery must not touch it";
  Bytes expect = before;
  std::copy(patch.begin(), patch.begin() + (C - 100), expect.begin() + 2 * C + 100);  // chunk 2 new, chunk 3 old
  Bytes got;
  ASSERT_EQ(read("/f", 0, expect.size(), &got), static_cast<ssize_t>(expect.size()));
  EXPECT_TRUE(got == expect);
  const std::string log = log_text();
  EXPECT_NE(log.find("restored chunk 3 of " + p), std::string::npos) << log;
  EXPECT_EQ(log.find("restored chunk 2 of"), std::string::npos) << log;
}

TEST_F(JournalRecovery, ATornRecordIsIgnored) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; JournalRecoveryV2 covers format 2";
  const Bytes before = testing::pattern_bytes(4 * C, 7);
  v.write_file("/f", before);
  const std::string p = v.cipher_path("/f");
  write("/f", C, testing::pattern_bytes(100, 8));
  undo_invalidation();
  // The record itself torn: its payload's last page is missing.
  const std::uint64_t last_page = (kJournalHeaderBlock + D - 1) / 4096 * 4096;
  write_range(journal(), last_page, Bytes(kJournalHeaderBlock + D - last_page, 0));
  // ... and the chunk damaged as well: nothing valid can restore it.
  testing::flip_bit(p, v.chunk_offset(1) + 50);
  EXPECT_EQ(reopen(), 0u);
  Bytes got;
  EXPECT_EQ(read("/f", C, 10, &got), -EIO) << "a torn record must never be used";
  EXPECT_EQ(log_text().find("restored chunk"), std::string::npos);
}

TEST_F(JournalRecovery, AStaleRecordNeverTouchesAChunkThatAuthenticates) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; JournalRecoveryV2 covers format 2";
  v.write_file("/f", testing::pattern_bytes(4 * C, 9));
  const std::string p = v.cipher_path("/f");
  write("/f", C, testing::pattern_bytes(100, 10));  // finished: chunk 1 is new and authenticates
  undo_invalidation();
  ASSERT_EQ(ChunkJournal::read_records(journal(), C, v.vault().keys()).size(), 1u);
  const Bytes after = read_range(p, 0, file_size(p));
  EXPECT_EQ(reopen(), 0u);
  EXPECT_TRUE(read_range(p, 0, file_size(p)) == after) << "recovery rolled back a chunk that authenticates";
  EXPECT_EQ(log_text().find("restored chunk"), std::string::npos) << log_text();
  EXPECT_TRUE(ChunkJournal::read_records(journal(), C, v.vault().keys()).empty());
}

TEST_F(JournalRecovery, ARecordForAReplacedFileIsSkipped) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; JournalRecoveryV2 covers format 2";
  const Bytes before = testing::pattern_bytes(4 * C, 11);
  v.write_file("/g", before);
  const std::string g = v.cipher_path("/g");
  write("/g", C, testing::pattern_bytes(100, 12));
  undo_invalidation();
  ASSERT_EQ(::unlink(g.c_str()), 0);
  v.write_file("/g", before);  // a new file (new file ID) under the same name
  testing::flip_bit(g, v.chunk_offset(1) + 50);  // failing, but the record's pre-image is the old file's
  EXPECT_EQ(reopen(), 0u);
  EXPECT_NE(log_text().find("has another file ID"), std::string::npos) << log_text();
  Bytes got;
  EXPECT_EQ(read("/g", C, 10, &got), -EIO) << "a record must never restore into another file";
  EXPECT_EQ(log_text().find("restored chunk"), std::string::npos) << log_text();
}

TEST_F(JournalRecovery, FsckReportsAndRepairRestoresTornChunks) {
  if (v.layout().aligned()) GTEST_SKIP() << "format 1 byte positions; JournalRecoveryV2 covers format 2";
  const Bytes before = testing::pattern_bytes(4 * C, 13);
  v.write_file("/f", before);
  const std::string p = v.cipher_path("/f");
  const Bytes pre_crash = read_range(p, 0, file_size(p));
  write("/f", C + 10, testing::pattern_bytes(200, 14));
  undo_invalidation();
  // Tear chunk 1: its second page still old.
  const std::uint64_t cut = (v.chunk_offset(1) + 4096) / 4096 * 4096;
  write_range(p, cut, Bytes(pre_crash.begin() + static_cast<std::ptrdiff_t>(cut),
                            pre_crash.begin() + static_cast<std::ptrdiff_t>(v.chunk_offset(2))));

  writer.reset();  // the daemon died
  FsckReport r = check_vault(v.vault(), v.engine());
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].what.find("chunk 1 is recoverable from the crash journal: mount the vault or run fsck --repair"),
            std::string::npos)
      << r.problems[0].what;
  EXPECT_FALSE(r.problems[0].unreadable);

  const FsckReport before_repair = r;
  FsckOptions o;
  o.repair = true;
  r = check_vault(v.vault(), v.engine(), o);
  EXPECT_TRUE(r.clean()) << (r.problems.empty() ? "" : r.problems[0].what);
  // The file checked again after its restore is counted once, as without --repair.
  EXPECT_EQ(r.files, before_repair.files);
  EXPECT_EQ(r.chunks, before_repair.chunks);
  EXPECT_EQ(r.bytes, before_repair.bytes);
  ASSERT_EQ(r.restored.size(), 1u);
  EXPECT_NE(r.restored[0].find("restored chunk 1 of " + v.cipher_rel("/f")), std::string::npos);
  EXPECT_TRUE(read_range(p, 0, file_size(p)) == pre_crash) << "the pre-image goes back byte for byte";
  EXPECT_TRUE(ChunkJournal::read_records(journal(), C, v.vault().keys()).empty());
  EXPECT_TRUE(check_vault(v.vault(), v.engine()).clean());
}


// ---- Format 2: a chunk is written in two places (entry, data block), and chunk 0 of a small
// file moves between the header block and its aligned place. The kill between any two pwrites,
// simulated as above.
class JournalRecoveryV2 : public JournalRecovery {
 protected:
  JournalRecoveryV2() : JournalRecovery(2) {}
  // A fresh ContentFile (the mount's read path) over what is on disk now.
  Bytes read_back(const std::string& plain) {
    Bytes got;
    const ssize_t n = read(plain, 0, 1 << 20, &got);
    EXPECT_GE(n, 0);
    return got;
  }
};

TEST_F(JournalRecoveryV2, AKillBetweenTheEntriesAndTheDataRestoresTheChunk) {
  const Bytes before = testing::pattern_bytes(6 * C, 41);
  v.write_file("/f", before);
  const std::string p = v.cipher_path("/f");
  const Bytes pre_crash = read_range(p, 0, file_size(p));
  const Bytes patch = testing::pattern_bytes(C, 42);
  write("/f", 2 * C + 100, patch);  // chunks 2 and 3: entries, then data
  undo_invalidation();
  auto recs = ChunkJournal::read_records(journal(), C, v.vault().keys());
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].chunk_count, 2u);
  EXPECT_EQ(recs[0].payload_len, 2 * D) << "the pre-images are chunk forms, nonce | ciphertext | tag";
  // The kill: the entries landed, chunk 3's data block did not (its old bytes are still there).
  const std::uint64_t d3 = v.data_offset(3, before.size());
  write_range(p, d3, Bytes(pre_crash.begin() + static_cast<std::ptrdiff_t>(d3),
                           pre_crash.begin() + static_cast<std::ptrdiff_t>(d3 + C)));
  Bytes torn;
  EXPECT_EQ(read("/f", 3 * C, 10, &torn), -EIO);

  EXPECT_EQ(reopen(), 1u);
  Bytes expect = before;
  std::copy(patch.begin(), patch.begin() + (C - 100), expect.begin() + 2 * C + 100);  // chunk 2 new, chunk 3 old
  EXPECT_TRUE(read_back("/f") == expect);
  EXPECT_NE(log_text().find("restored chunk 3 of " + p), std::string::npos) << log_text();
  EXPECT_EQ(log_text().find("restored chunk 2 of"), std::string::npos) << log_text();
  EXPECT_TRUE(check_vault(*v2, v.engine()).clean());
}

TEST_F(JournalRecoveryV2, AKillWhileASmallFileGrowsOutOfItsHeaderBlockPutsItBack) {
  const Bytes before = testing::pattern_bytes(1000, 43);  // inline: block 0 alone
  v.write_file("/f", before);
  const std::string p = v.cipher_path("/f");
  const std::uint64_t old_size = file_size(p);
  ASSERT_EQ(old_size, 128u + 1000u);
  write("/f", 1000, testing::pattern_bytes(5000, 44));  // chunk 0 moves to 4096, chunk 1 appears
  undo_invalidation();
  // The kill: the file had grown page by page into chunk 0's new data block.
  ASSERT_EQ(::truncate(p.c_str(), 4096 + 2000), 0);
  Bytes got;
  EXPECT_EQ(read("/f", 0, 100, &got), -EIO) << "a size no write leaves: nothing reads";

  EXPECT_EQ(reopen(), 1u);
  EXPECT_EQ(file_size(p), old_size) << "back in the header block, at its size before the write";
  EXPECT_TRUE(read_back("/f") == before);
  EXPECT_TRUE(check_vault(*v2, v.engine()).clean());
}

TEST_F(JournalRecoveryV2, AKillWhileAFileShrinksIntoItsHeaderBlockLeavesItReadable) {
  const Bytes before = testing::pattern_bytes(10000, 45);
  v.write_file("/f", before);
  const std::string p = v.cipher_path("/f");
  {
    const int fd = ::open(p.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ContentFile f(fd, v.vault().layout(), v.engine(), v.vault().keys(), p, writer->journal());
    ASSERT_GE(f.plain_size(), 0);
    // Cuts to chunk 0 alone (8192 bytes on disk), reseals chunk 0 inline, then cuts to 628.
    ASSERT_EQ(f.truncate(500), 0);
    ::close(fd);
  }
  ASSERT_EQ(file_size(p), 628u);
  undo_invalidation();
  // The kill before the last cut: chunk 0's aligned data block is still there, and the file is
  // 8192 bytes long, but entry 0 is the inline chunk's.
  ASSERT_EQ(::truncate(p.c_str(), 8192), 0);
  // (the truncate zero-fills 4096..8192; the data block held chunk 0's old ciphertext there)
  auto recs = ChunkJournal::read_records(journal(), C, v.vault().keys());
  ASSERT_EQ(recs.size(), 1u);
  const Bytes payload = payload_of(recs[0]);
  ASSERT_EQ(payload.size(), C + kChunkOverhead);
  write_range(p, 4096, Bytes(payload.begin() + 12, payload.begin() + 12 + C));  // the old data block
  Bytes got;
  EXPECT_EQ(read("/f", 0, 100, &got), -EIO);

  EXPECT_EQ(reopen(), 1u);
  // The truncation was never acknowledged: the file reads as its first chunk, as it was.
  EXPECT_TRUE(read_back("/f") == Bytes(before.begin(), before.begin() + C));
  EXPECT_TRUE(check_vault(*v2, v.engine()).clean());
}

TEST_F(JournalRecoveryV2, FsckReportsAndRepairRestoresATornChunk) {
  const Bytes before = testing::pattern_bytes(3 * C, 46);
  v.write_file("/f", before);
  const std::string p = v.cipher_path("/f");
  const Bytes pre_crash = read_range(p, 0, file_size(p));
  write("/f", C + 5, testing::pattern_bytes(10, 47));
  undo_invalidation();
  const std::uint64_t d1 = v.data_offset(1, before.size());
  write_range(p, d1, Bytes(pre_crash.begin() + static_cast<std::ptrdiff_t>(d1),
                           pre_crash.begin() + static_cast<std::ptrdiff_t>(d1 + C)));
  writer.reset();
  FsckReport r = check_vault(v.vault(), v.engine());
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].what.find("chunk 1 is recoverable from the crash journal"), std::string::npos)
      << r.problems[0].what;
  FsckOptions o;
  o.repair = true;
  r = check_vault(v.vault(), v.engine(), o);
  EXPECT_TRUE(r.clean()) << (r.problems.empty() ? "" : r.problems[0].what);
  EXPECT_TRUE(read_range(p, 0, file_size(p)) == pre_crash) << "entry and data block go back byte for byte";
}

}  // namespace
}  // namespace gcfs
