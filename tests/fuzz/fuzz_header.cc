// FileHeader::decode over arbitrary bytes: the 24 bytes at the start of every ciphertext file.
// Properties: never crashes or reads past the input; what it accepts is exactly what encode()
// writes (a header has one spelling, so nothing else can slip through as "almost a header").
#include <algorithm>
#include <cstdint>
#include <span>

#include "fs/file_header.h"
#include "tests/fuzz/fuzz_common.h"

using namespace gcfs;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!fuzz::seed_dir()) return 0;
  auto h = FileHeader::random().encode();
  fuzz::write_seed("header", h);
  FileHeader zero;
  fuzz::write_seed("header-zero-id", zero.encode());
  fuzz::write_seed("short", std::span<const std::uint8_t>(h.data(), 10));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  auto h = FileHeader::decode(in);
  if (!h) return 0;
  if (size < kFileHeaderBytes) fuzz::fail("accepted a header shorter than 24 bytes");
  const auto enc = h->encode();
  if (!std::equal(enc.begin(), enc.end(), in.begin())) fuzz::fail("accepted bytes that encode() would not write");
  if (!std::equal(h->id.begin(), h->id.end(), in.begin() + 8)) fuzz::fail("file ID not taken from bytes 8..23");
  return 0;
}
