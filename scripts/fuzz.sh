#!/bin/bash
# Builds the libFuzzer targets (clang, ASan+UBSan, cpu engine only) into build-fuzz/ and runs each
# for a bounded time, starting from a seed corpus the targets write themselves.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default: 30 s, every target)
#
# Exits non-zero when a target crashes or breaks one of its properties; the input that did it is
# left in build-fuzz/findings/ and can be replayed with: build-fuzz/tests/fuzz/TARGET FILE
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${1:-30}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(fuzz_config fuzz_header fuzz_names fuzz_chunk fuzz_journal fuzz_volume_header)

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool is needed (apt-get install clang)" >&2; exit 1; }
done
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DGPUCRYPTFS_FUZZ=ON -DGPUCRYPTFS_CUDA=OFF -DBUILD_TESTING=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

mkdir -p "$build/findings"
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  # -runs=0 with the seed variable set: the target writes its seeds and replays them once.
  if ! GCFS_FUZZ_WRITE_SEEDS="$corpus" "$build/tests/fuzz/$t" -runs=0 -artifact_prefix="$build/findings/$t-" \
      "$corpus" >"$build/$t.log" 2>&1; then
    echo "fuzz.sh: $t fails on its own seeds:" >&2
    grep -E -A12 'ERROR|runtime error|property violated' "$build/$t.log" | head -n 40 >&2
    status=1
    continue
  fi
  echo "fuzz.sh: $t for ${seconds}s ($(ls "$corpus" | wc -l) inputs in the corpus)"
  # One job: CI has 2 cores shared with the rest of the pipeline. -timeout catches hangs,
  # -rss_limit_mb runaway allocations.
  if ! "$build/tests/fuzz/$t" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build/findings/$t-" "$corpus" >"$build/$t.log" 2>&1; then
    echo "fuzz.sh: $t FAILED; the last lines of $build/$t.log:" >&2
    grep -E -A12 'ERROR|runtime error|property violated|Test unit written' "$build/$t.log" | head -n 40 >&2
    status=1
  else
    grep -E 'stat::number_of_executed_runs|cov:' "$build/$t.log" | tail -n 2 | sed "s/^/  /"
  fi
done
exit $status
