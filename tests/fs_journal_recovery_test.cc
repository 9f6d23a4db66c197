// Which rewrites ContentFile journals (fs/chunk_journal.h), and recovery (fs/journal_recovery.h)
// from the tear a SIGKILL leaves, simulated exactly: the record stays valid (its invalidation never
// happened) and the chunk on disk is a mix of new and old pages. Reopening the vault restores the
// chunk, never touches a chunk that authenticates, and ignores torn records.
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
