#!/bin/bash
# multi_gpu.sh: issue 17 on a machine with two GPUs, run from the repository root with the binaries
# of scripts/build_for_device.sh. The host's pinned-copy ceiling; engine shapes on GPU 0 alone and
# on both GPUs, for the gpu engine as `--engine gpu --gpus 0,1` builds it (one engine per GPU, each
# batch whole to one of them) beside one engine over both (gpuone); and the same shapes in two
# processes at once, one per GPU: what two engines that share nothing reach on this host.
#   env: BIN, OUT, SHAPES (gpu_engine_bench --only), ROUNDS (of the both-GPU rows), ENGINES
set -u
BIN=${BIN:-build-device/carry}
OUT=${OUT:-/tmp/multi_gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$BIN/lib
B=$BIN/gpu_engine_bench
SHAPES=${SHAPES:-8x16M,32x128K,16x128K,4x16M}
rows() { grep -E '^(csv,throughput|csv,probe|batching|gpu|shapes)'; }
nvidia-smi topo -m 2>/dev/null | head -8
echo "== probe"; timeout 60 "$B" --probe | rows
echo "== GPU 0 alone"; CUDA_VISIBLE_DEVICES=0 timeout 120 "$B" --shapes --only "$SHAPES" --engines gpu | rows
for round in $(seq 1 "${ROUNDS:-1}"); do
  echo "== both GPUs, round $round"; timeout 200 "$B" --shapes --gpus 0,1 --only "$SHAPES" --engines "${ENGINES:-cpu,gpu,gpuone}" | rows
done
echo "== two processes at once, one GPU each"
for d in 0 1; do
  CUDA_VISIBLE_DEVICES=$d timeout 120 "$B" --shapes --only 32x128K,16x128K,4x16M --engines gpu > "$OUT/proc$d.txt" 2>&1 &
done
wait
for d in 0 1; do sed "s/^/gpu$d: /" "$OUT/proc$d.txt" | grep -E 'csv,throughput|batching'; done
