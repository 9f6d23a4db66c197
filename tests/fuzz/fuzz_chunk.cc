// Chunk opening: a ContentFile reading (and then writing) a ciphertext file whose bytes are the
// fuzzer's. Anyone with write access to the ciphertext folder controls these bytes.
// Properties: never crashes; the size it reports is the one FORMAT.md derives from the file size;
// every byte a successful read returns is either authentic plaintext (the seeds hold a known
// pattern, and without the key nothing else can authenticate) or zero from a chunk that is all
// zero on disk (a hole); a whole-file read succeeds only if every chunk does; a write that
// succeeds reads back.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "crypto/cpu_engine.h"
#include "fs/content/content_file.h"
#include "fs/plain_io.h"
#include "fs/log.h"
#include "tests/fuzz/fuzz_common.h"

using namespace gcfs;

namespace {

constexpr std::uint32_t kChunk = 4096;

std::uint8_t pattern(std::uint64_t i) { return static_cast<std::uint8_t>((i * 151 + (i >> 9) * 7 + 1) | 1); }

struct Env {
  ChunkLayout layout{kChunk};
  CpuEngine engine{1};
  int fd = -1;
  Env() {
    fd = ::memfd_create("gcfs-fuzz", MFD_CLOEXEC);
    if (fd < 0) fuzz::fail("memfd_create failed");
    log::to_file("/dev/null");  // every rejected chunk is logged; keep the fuzzer's output readable
  }
  void load(const std::uint8_t* data, std::size_t size) {
    if (::ftruncate(fd, 0) != 0) fuzz::fail("ftruncate failed");
    if (size && pwrite_full(fd, data, size, 0) != static_cast<ssize_t>(size)) fuzz::fail("pwrite failed");
  }
  std::vector<std::uint8_t> bytes() {
    off_t n = ::lseek(fd, 0, SEEK_END);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(n));
    if (n && pread_full(fd, out.data(), out.size(), 0) != n) fuzz::fail("pread failed");
    return out;
  }
};

Env& env() {
  static Env e;
  return e;
}

std::vector<std::uint8_t> patterned(std::uint64_t off, std::size_t len) {
  std::vector<std::uint8_t> v(len);
  for (std::size_t i = 0; i < len; ++i) v[i] = pattern(off + i);
  return v;
}

void seed(const std::string& name, const std::vector<std::pair<std::uint64_t, std::size_t>>& writes) {
  Env& e = env();
  e.load(nullptr, 0);
  ContentFile f(e.fd, e.layout, e.engine, fuzz::fixed_keys(), "seed");
  for (auto [off, len] : writes) {
    auto p = patterned(off, len);
    if (f.write(off, p.data(), len) != static_cast<ssize_t>(len)) fuzz::fail("seed write failed");
  }
  fuzz::write_seed(name, e.bytes());
}

bool all_zero(const std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seed_dir()) return 0;
  seed("empty", {});
  seed("short", {{0, 100}});
  seed("one-chunk", {{0, kChunk}});
  seed("three-chunks", {{0, 2 * kChunk + 77}});
  seed("with-hole", {{0, kChunk}, {3 * kChunk, 300}});  // chunks 1 and 2 are holes
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Env& e = env();
  e.load(data, size);
  ContentFile f(e.fd, e.layout, e.engine, fuzz::fixed_keys(), "fuzz");
  // FORMAT.md "Sizes": a file that ends in an incomplete chunk reads as its whole chunks; only a
  // size inside the header is corrupt.
  const auto expect_size = e.layout.readable_plain_size(size);
  const std::int64_t psize = f.plain_size();
  if (!expect_size) {
    if (psize >= 0) fuzz::fail("a ciphertext size FORMAT.md calls corrupt got a plaintext size");
    return 0;
  }
  if (psize < 0 || static_cast<std::uint64_t>(psize) != *expect_size) fuzz::fail("plaintext size differs from FORMAT.md");
  const std::uint64_t n = static_cast<std::uint64_t>(psize);
  const bool header_ok = n == 0 || FileHeader::decode({data, size}).has_value();

  bool every_chunk_ok = true;
  std::vector<std::uint8_t> buf(kChunk);
  for (std::uint64_t k = 0; k < e.layout.chunk_count(n); ++k) {
    const std::size_t len = e.layout.chunk_plain_len(k, n);
    std::memset(buf.data(), 0xEE, len);
    const ssize_t r = f.read(k * kChunk, len, buf.data());
    if (r < 0) {
      every_chunk_ok = false;
      continue;
    }
    if (static_cast<std::size_t>(r) != len) fuzz::fail("short read inside the file");
    const std::uint64_t disk = e.layout.disk_offset(k);
    const bool hole = all_zero(data + disk, len + kChunkOverhead);
    if (!header_ok && !hole) fuzz::fail("a chunk opened although the header is not a gpucryptfs header");
    for (std::size_t i = 0; i < len; ++i)
      if (buf[i] != (hole ? 0 : pattern(k * kChunk + i)))
        fuzz::fail("read returned bytes that are neither authentic nor a hole, chunk " + std::to_string(k));
  }
  if (n) {
    std::vector<std::uint8_t> whole(n);
    const ssize_t r = f.read(0, n, whole.data());
    if (r >= 0 && !every_chunk_ok) fuzz::fail("whole-file read succeeded although a chunk failed");
    if (r < 0 && every_chunk_ok) fuzz::fail("whole-file read failed although every chunk read");
  }

  // A small write somewhere in or just past the file: read-modify-write over hostile chunks must
  // fail cleanly or leave readable, correct bytes.
  const std::uint64_t woff = size ? (data[size - 1] * 131u + size) % (n + kChunk) : 0;
  const std::size_t wlen = size > 1 ? 1 + data[size - 2] % 300 : 17;
  auto w = patterned(woff, wlen);
  const ssize_t wr = f.write(woff, w.data(), wlen);
  if (wr >= 0) {
    if (static_cast<std::size_t>(wr) != wlen) fuzz::fail("short write");
    ContentFile again(e.fd, e.layout, e.engine, fuzz::fixed_keys(), "fuzz-reopen");
    std::vector<std::uint8_t> back(wlen);
    if (again.read(woff, wlen, back.data()) != static_cast<ssize_t>(wlen) || back != w)
      fuzz::fail("a successful write did not read back");
  }
  return 0;
}
