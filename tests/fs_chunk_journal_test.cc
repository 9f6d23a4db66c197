// The crash journal's records (fs/chunk_journal.h) on real files: written, read back,
// checksummed against the documented MAC, invalidated, their slots reused, one process at a time.
// Recovery from the tear a kill leaves: fs_journal_recovery_test.cc; what both share:
// tests/support/journal_test_support.h.
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

#include "tests/support/journal_test_support.h"

namespace gcfs {
namespace {

using namespace journal_test;

// ---------------------------------------------------------------------------------------------
// Records.


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

}  // namespace
}  // namespace gcfs
