// Per-thread scratch buffers for content I/O: a FUSE worker reuses them for every request instead
// of allocating up to a few MiB each time. They come from the engine, so that with the gpu engine
// they are page-locked and the chunks in them travel to and from the GPU without a staging copy.
#pragma once

#include <cstddef>

#include "crypto/chunk_engine.h"

namespace gcfs {

// The three buffers a thread has, by what they hold.
enum ScratchSlot : int {
  kCipherReadScratch = 0,    // ciphertext read from the backing file
  kPlainScratch = 1,         // plaintext (edge chunks of a write, a read's output)
  kCipherSealedScratch = 2,  // ciphertext sealed for writing
};

// This thread's buffer `which`, at least n bytes, from `engine`. Grown in powers of two (pinning
// is slow, so it should happen a few times per thread, not per request); freed with the thread.
// A buffer from another engine is replaced (any memory would be correct, but only the engine's
// own is the fast kind). Growing keeps the bytes the buffer held.
HostBuffer& scratch(ChunkEngine& engine, ScratchSlot which, std::size_t n);

// The size this thread's buffer `which` should have once it is first needed: its first
// allocation then takes that size at once (not a power of two above it), and a thread that never
// touches content allocates nothing. With the gpu engine the buffers are page-locked, which no
// kernel can page out: allocated at thread start they held 7 MiB a request thread from the
// mount on, whether or not it ever read a file (a daemon serving a million names and no data).
void plan_scratch(ScratchSlot which, std::size_t n);

}  // namespace gcfs
