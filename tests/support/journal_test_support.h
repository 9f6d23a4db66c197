// What the crash journal tests share (tests/fs_chunk_journal_test.cc, fs_journal_recovery_test.cc):
// the test vault's chunk sizes, file IDs, and plain reads and writes of byte ranges.
#pragma once

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

namespace gcfs::journal_test {

using Bytes = std::vector<std::uint8_t>;

using testing::TempDir;
using testing::TestVault;

constexpr std::uint32_t C = TestVault::kChunk;
constexpr std::uint64_t D = C + kChunkOverhead;

inline FileId some_id(std::uint8_t seed) {
  FileId id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(seed + i);
  return id;
}

inline Bytes read_range(const std::string& path, std::uint64_t off, std::size_t n) {
  Bytes b(n);
  int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  const ssize_t got = pread_full(fd, b.data(), n, off);
  ::close(fd);
  b.resize(got < 0 ? 0 : static_cast<std::size_t>(got));
  return b;
}

inline void write_range(const std::string& path, std::uint64_t off, const Bytes& b) {
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite_full(fd, b.data(), b.size(), off), static_cast<ssize_t>(b.size()));
  ::close(fd);
}

inline std::uint64_t file_size(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return static_cast<std::uint64_t>(st.st_size);
}

// The pre-images a record holds, read from the journal.
inline Bytes payload_of(const JournalRecord& r) {
  Bytes b;
  EXPECT_EQ(r.load_payload(&b), 0);
  return b;
}

}  // namespace gcfs::journal_test
