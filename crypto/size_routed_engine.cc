#include "crypto/size_routed_engine.h"

namespace gcfs {

ChunkEngine& SizeRoutedEngine::pick(std::span<const ChunkOp> ops) {
  std::size_t bytes = 0;
  for (const auto& op : ops) {
    bytes += op.len;
    if (bytes >= below_) {
      large_count_.fetch_add(1, std::memory_order_relaxed);
      return large_;
    }
  }
  small_count_.fetch_add(1, std::memory_order_relaxed);
  return small_;
}

}  // namespace gcfs
