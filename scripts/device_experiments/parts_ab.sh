#!/bin/bash
# parts_ab.sh: the resident worker splitting chunks over idle CTAs (GPUCRYPTFS_RESIDENT_PARTS=4,
# the default) against one CTA per chunk (=1), alternated ROUNDS times: engine shapes on GPU 0
# alone and, on a machine with two GPUs, on both. Run from the repository root with the binaries
# of scripts/build_for_device.sh.   env: BIN, ROUNDS, SECS (per row), SHAPES1 (one GPU), SHAPES2
BIN=${BIN:-build-device/carry}
export LD_LIBRARY_PATH=$BIN/lib
B=$BIN/gpu_engine_bench
rows() { grep -E '^csv,throughput' | cut -d, -f2-; }
gpus=$(nvidia-smi -L | wc -l)
for round in $(seq 1 "${ROUNDS:-2}"); do
  for parts in 1 4; do
    echo "== round $round, parts $parts, GPU 0"
    GPUCRYPTFS_RESIDENT_PARTS=$parts CUDA_VISIBLE_DEVICES=0 timeout 120 "$B" --shapes --seconds "${SECS:-0.5}" \
      --only "${SHAPES1:-2x128K,8x128K,16x128K,32x128K,16x1M}" --engines gpu | rows
    if [ "$gpus" -ge 2 ]; then
      echo "== round $round, parts $parts, GPUs 0 and 1"
      GPUCRYPTFS_RESIDENT_PARTS=$parts timeout 120 "$B" --shapes --gpus 0,1 --seconds "${SECS:-0.5}" \
        --only "${SHAPES2:-32x128K,16x1M}" --engines gpu | rows
    fi
  done
done
