#include "fs/engine_factory.h"

#include "crypto/cpu_engine.h"
#include "crypto/errors.h"
#include "fs/log.h"

namespace gcfs {
namespace {

// Sends each batch where it runs fastest: small batches pay more in PCIe latency and launch cost
// than the GPU saves them.
class HybridEngine final : public ChunkEngine {
 public:
  HybridEngine(ChunkEngine& cpu, ChunkEngine& gpu, std::size_t crossover)
      : cpu_(cpu), gpu_(gpu), crossover_(crossover) {}
  std::string name() const override { return "auto"; }
  void seal(std::span<ChunkOp> ops) override { pick(ops).seal(ops); }
  void open(std::span<ChunkOp> ops) override { pick(ops).open(ops); }

 private:
  ChunkEngine& pick(std::span<ChunkOp> ops) {
    std::size_t bytes = 0;
    for (const auto& op : ops) bytes += op.len;
    return bytes >= crossover_ ? gpu_ : cpu_;
  }
  ChunkEngine& cpu_;
  ChunkEngine& gpu_;
  std::size_t crossover_;
};

}  // namespace

EngineSet::EngineSet(const EngineOptions& o) {
  if (o.name != "cpu" && o.name != "gpu" && o.name != "auto")
    throw UserError("unknown engine '" + o.name + "': choose cpu, gpu or auto");
  auto cpu = std::make_unique<CpuEngine>(o.cpu_threads);
  const std::size_t threads = cpu->threads();
  cpu_ = std::move(cpu);
  if (o.name == "cpu") {
    active_ = cpu_.get();
    description_ = "cpu engine (OpenSSL, " + std::to_string(threads) + " threads)";
    return;
  }
  if (o.name == "gpu") {
    gpu_ = make_gpu_engine(o.gpu, *cpu_);  // throws with the GPU problem named
    active_ = gpu_.get();
    description_ = "gpu engine";
    return;
  }
  std::string why;
  if (list_gpus(&why).empty()) {
    active_ = cpu_.get();
    description_ = "auto: no usable GPU (" + why + "), using the cpu engine (" + std::to_string(threads) + " threads)";
    return;
  }
  try {
    gpu_ = make_gpu_engine(o.gpu, *cpu_);
  } catch (const UserError& e) {
    active_ = cpu_.get();
    description_ = std::string("auto: the GPU cannot be used (") + e.what() + "), using the cpu engine";
    return;
  }
  hybrid_ = std::make_unique<HybridEngine>(*cpu_, *gpu_, o.auto_crossover_bytes);
  active_ = hybrid_.get();
  description_ = "auto: gpu engine for batches of " + std::to_string(o.auto_crossover_bytes) +
                 " bytes and more, cpu engine below";
}

EngineSet::~EngineSet() = default;

}  // namespace gcfs
