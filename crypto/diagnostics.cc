#include "crypto/diagnostics.h"

#include <atomic>
#include <cstdio>

namespace gcfs::diag {
namespace {

// Constant-initialised, so a message written during another file's static initialisation still
// finds it.
std::atomic<Sink> g_sink{nullptr};

}  // namespace

void set_sink(Sink sink) { g_sink.store(sink, std::memory_order_release); }

void write(Level level, std::string_view message) {
  if (const Sink sink = g_sink.load(std::memory_order_acquire)) return sink(level, message);
  std::fprintf(stderr, "gpucryptfs: %.*s\n", static_cast<int>(message.size()), message.data());
}

}  // namespace gcfs::diag
