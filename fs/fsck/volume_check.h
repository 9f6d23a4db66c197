// volume fsck: authenticates every chunk of a volume's content stream (the chunk code's format,
// docs/FORMAT.md "Volume mode"), skipping holes, and lists what fails. The header slots are the
// caller's (mount/cli/cmd_volume_tools.cc), since checking them takes the password.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "crypto/chunk_engine.h"
#include "crypto/key_ring.h"
#include "fs/chunk_layout.h"

namespace gcfs {

struct VolumeCheckReport {
  std::uint64_t chunks = 0;  // chunks of the volume, holes included
  std::uint64_t holes = 0;   // never written: sparse, or all zeros on disk
  std::uint64_t bytes = 0;   // ciphertext bytes read and authenticated
  std::vector<std::string> problems;
};

// fd: the container, open for reading. volume_size: the authenticated config's. progress gets
// (ciphertext bytes done, bytes to check): holes count as done at once, so the cost and the bar
// follow the data, not the volume's size.
VolumeCheckReport check_volume_content(int fd, const ChunkLayout& layout, const KeyRing& keys, ChunkEngine& engine,
                                       std::uint64_t volume_size,
                                       const std::function<void(std::uint64_t, std::uint64_t)>& progress);

}  // namespace gcfs
