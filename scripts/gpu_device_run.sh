#!/usr/bin/env bash
# Runs ON the GPU device machine, from the repository root, with the binaries that
# scripts/build_for_device.sh left in build-device/carry (carry that folder with the run). One call
# of under 10 minutes, on one GPU or on several (two GPUs in one host: each figure is then taken
# with GPU 0 alone and with every GPU):
#   1. tests: the GPU tests, the hybrid engine's tests, and the mounted-vault suites with --engine
#      $TEST_ENGINE (default auto) over /dev/fuse and over io_uring (switched on for the run and put
#      back after) in parallel with them, before any timing;
#   2. engine rows (on several GPUs first the pinned copy bandwidth of each GPU and of all at once):
#      gpu_engine_bench --shapes (8 x 16 MiB, 32 x 128 KiB, 4 x 16 MiB, 16 x 1 MiB; seal
#      and open) for the cpu engine, the gpu engine and auto (the hybrid), once with
#      CUDA_VISIBLE_DEVICES=0 and once with every GPU (--gpus 0,1,...);
#   3. mount rows: 8 streams writing and reading through a mounted vault (backing in /dev/shm) with
#      --engine cpu, gpu --gpus 0, gpu --gpus all, auto --gpus 0, auto --gpus all, daemon CPU per GB;
#   4. small files through the mount (untar, read the tree, rm -rf) with cpu and auto;
#   5. with EXTRA=1 (a call of its own: it does not fit beside the rest), the older sections: the
#      full gpu_engine_bench, `gpucryptfs bench --quick`, 1 GiB dd and the ext4 volume.
# Every step runs under `timeout`, and steps are skipped (saying so) once the run nears DEADLINE
# seconds (default 540), so the call always ends inside the device's 10-minute limit with its
# files. Everything goes under $OUT in at most 5 files (summary.txt, run.log, engine.csv, mount.txt,
# tests.txt); a short summary is printed last.
#
#   usage: scripts/gpu_device_run.sh
#   env: BIN (default build-device/carry), OUT, DEADLINE (s), TEST_ENGINE (auto|gpu), STREAM_MIB
#        (per stream, default 128), CHUNK (vault chunk size, default the directory default),
#        SKIP_TESTS=1, SKIP_ENGINE=1, SKIP_SMALL=1, ONLY_TESTS=1, EXTRA=1, MOUNT_RUNS (see step 3)
set -uo pipefail
BIN=${BIN:-build-device/carry}
# Carried packed (build-device/pack/carry.tgz, scripts/build_for_device.sh): unpacked here first.
if [ ! -d "$BIN" ] && [ -f build-device/pack/carry.tgz ]; then
  mkdir -p build-device && tar -C build-device -xzf build-device/pack/carry.tgz
fi
[ -d "$BIN" ] || { echo "no $BIN: build it with scripts/build_for_device.sh and carry it (or build-device/pack)" >&2; exit 2; }
BIN=$(cd "$BIN" && pwd)
OUT=${OUT:-$PWD/gpu-run-out}
DEADLINE=${DEADLINE:-540}
TEST_ENGINE=${TEST_ENGINE:-auto}
STREAM_MIB=${STREAM_MIB:-128}
STREAMS=8
mkdir -p "$OUT"
export PATH="$PATH:/usr/local/cuda/bin"
# The test programs built against shared GoogleTest find it in carry/lib (scripts/build_for_device.sh).
export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Keep NVLink multicast off in anything started from here (the device's rule; we never use it).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# FUSE over io_uring (Linux 6.14+) is off until root turns it on: on for this run (the mounted
# suites run over both transports, and every mount below takes io_uring through --transport
# auto), back as it was afterwards.
uring_switch=/sys/module/fuse/parameters/enable_uring
uring_before=
transports=classic
if [ -w "$uring_switch" ]; then
  uring_before=$(cat "$uring_switch")
  echo 1 > "$uring_switch"
  trap '[ "$uring_before" = Y ] || [ "$uring_before" = 1 ] || echo 0 > "$uring_switch"' EXIT
  transports="classic uring"
fi
START=$SECONDS
LOG="$OUT/run.log"
: > "$LOG"

section() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - START)) | tee -a "$LOG"; }
# Seconds left before DEADLINE, never below 1.
left() { local l=$((DEADLINE - (SECONDS - START))); echo $((l > 1 ? l : 1)); }
# limit WANTED: the smaller of WANTED and what is left.
limit() { local l; l=$(left); echo $(($1 < l ? $1 : l)); }
# enough SECONDS: whether a step that needs about SECONDS still fits (else it says so and is skipped).
enough() {
  if (($(left) < $1)); then
    echo "skipped: $(left) s left before the deadline, the step needs about $1 s" | tee -a "$LOG"
    return 1
  fi
}
have() { [ -x "$BIN/$1" ]; }

if command -v nvidia-smi > /dev/null; then NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true); fi
NGPU=${NGPU:-0}
ALL_GPUS=$(seq -s, 0 $((NGPU > 0 ? NGPU - 1 : 0)))

section "environment"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) (the device's copy of the repository)"
  [ -f "$BIN/BUILD_INFO" ] && echo "binaries: $(tr '\n' ' ' < "$BIN/BUILD_INFO")"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1
    nvidia-smi topo -m 2>&1 | head -12
  else
    echo "nvidia-smi: not found"
  fi
  echo "GPUs: $NGPU (all: $ALL_GPUS)"
  echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "NUMA nodes online: $(cat /sys/devices/system/node/online 2>/dev/null || echo unknown)"
  for n in /sys/devices/system/node/node*; do [ -e "$n/cpulist" ] && echo "  $(basename "$n"): cpus $(cat "$n/cpulist")"; done
  echo "kernel: $(uname -r)"
  echo "fuse io_uring switch: ${uring_before:-absent} before this run; mounted suites over: $transports; max_pages_limit $(cat /proc/sys/fs/fuse/max_pages_limit 2>/dev/null || echo absent)"
  if [ -e /dev/fuse ]; then echo "/dev/fuse: present"; else echo "/dev/fuse: ABSENT"; fi
  echo "carried: $(ls "$BIN" | tr '\n' ' ')"
} 2>&1 | tee -a "$LOG"

# ---------------------------------------------------------------------------------------------
section "tests (GPU tests and the hybrid engine's; mount suites with --engine $TEST_ENGINE alongside)"
: > "$OUT/tests.txt"
if [[ ${SKIP_TESTS:-0} != 1 ]] && enough 120; then
  integ_dir=/tmp/gcfs-integration; rm -rf "$integ_dir"; mkdir -p "$integ_dir"
  integ_pids=()
  start_suites() {  # transport: every mounted suite over it, in the background
    [ -e /dev/fuse ] || return 0
    for t in "$BIN"/integration_*_test "$BIN"/volume_mount_test; do
      [ -x "$t" ] || continue
      tlog="$integ_dir/$(basename "$t").$1.log"
      ( GPUCRYPTFS_TEST_ENGINE=$TEST_ENGINE GPUCRYPTFS_TEST_TRANSPORT=$1 GPUCRYPTFS_TEST_BIN="$BIN/gpucryptfs" \
          GPUCRYPTFS_TEST_DENY_IO_URING="$BIN/deny_io_uring" \
          timeout "$(limit 200)" "$t" > "$tlog" 2>&1; echo "exit $?" >> "$tlog" ) &
      integ_pids+=($!)
    done
  }
  # Every suite's daemons bring up a context on each GPU: on one GPU both transports' suites run at
  # once beside the GPU tests; with several, 24 suites at once made every mount and unmount take
  # seconds (engines built in 1.7 s each, daemons 6 s to exit) and the suites ran out of time, so
  # there the second transport's suites start once the first's are done.
  waves=("$transports")
  ((NGPU > 1)) && read -r -a waves <<< "$transports"
  start_suites_of() { local tr; for tr in $1; do start_suites "$tr"; done; }
  start_suites_of "${waves[0]}"
  for t in gpu_math_test crypto_hybrid_engine_test gpu_engine_test gpu_buffers_test; do
    have "$t" || { echo "== $t: not carried" >> "$OUT/tests.txt"; continue; }
    echo "== $t" >> "$OUT/tests.txt"
    timeout "$(limit 200)" "$BIN/$t" >> "$OUT/tests.txt" 2>&1
    echo "== $t exit $?" >> "$OUT/tests.txt"
  done
  for p in "${integ_pids[@]}"; do wait "$p"; done
  for w in "${waves[@]:1}"; do
    integ_pids=()
    start_suites_of "$w"
    for p in "${integ_pids[@]}"; do wait "$p"; done
  done
  {
    for f in "$integ_dir"/*.log; do
      [ -e "$f" ] || { echo "no integration suites ran (no /dev/fuse, or none carried)"; break; }
      echo "== $(basename "$f" .log) (--engine $TEST_ENGINE): $(grep -E '^\[  (PASSED|FAILED) ' "$f" | tr '\n' ' ') $(tail -1 "$f")"
      grep -E '^\[  FAILED  \]' "$f" | head -20
    done
    for f in "$integ_dir"/*.log; do
      [ -e "$f" ] && grep -q -E '^\[  FAILED|exit [1-9]' "$f" && { echo; echo "#### $(basename "$f")"; grep -v -E '^\[ +(OK|RUN) ' "$f" | tail -60; }
    done
  } >> "$OUT/tests.txt" 2>&1
  grep -E '^== .*(exit|engine)|^\[  (PASSED|FAILED) |^\[  FAILED  \]' "$OUT/tests.txt" | tee -a "$LOG"
fi

# ONLY_TESTS=1: the tests alone (every step below finds no time left and says so).
[[ ${ONLY_TESTS:-0} == 1 ]] && DEADLINE=0

# ---------------------------------------------------------------------------------------------
section "engine rows: cpu, gpu and auto, one GPU beside all of them"
: > "$OUT/engine.csv"
shapes_run() {  # cuda_visible_devices gpus_argument
  local visible=$1 gpus=$2 args=(--shapes --quick)
  [ -n "$gpus" ] && args+=(--gpus "$gpus")
  echo "-- CUDA_VISIBLE_DEVICES=$visible gpu_engine_bench ${args[*]}" | tee -a "$LOG"
  CUDA_VISIBLE_DEVICES=$visible timeout "$(limit 90)" "$BIN/gpu_engine_bench" "${args[@]}" > /tmp/gcfs-shapes.txt 2>&1
  echo "exit $?" >> /tmp/gcfs-shapes.txt
  grep -v '^csv,' /tmp/gcfs-shapes.txt | grep -v -E '^(throughput_|what )' | tee -a "$LOG"
  grep '^csv,throughput' /tmp/gcfs-shapes.txt >> "$OUT/engine.csv"
}
if [[ ${SKIP_ENGINE:-0} == 1 ]]; then
  echo "SKIP_ENGINE=1: engine rows skipped" | tee -a "$LOG"
elif have gpu_engine_bench && ((NGPU > 0)); then
  if ((NGPU > 1)) && enough 30; then
    # Pinned copies of each GPU alone and of all at once: the host's ceiling for several GPUs.
    echo "-- gpu_engine_bench --probe" | tee -a "$LOG"
    timeout "$(limit 60)" "$BIN/gpu_engine_bench" --probe 2>&1 | grep '^csv,probe' | tee -a "$LOG"
  fi
  enough 45 && shapes_run 0 0
  ((NGPU > 1)) && enough 45 && shapes_run "$ALL_GPUS" "$ALL_GPUS"
else
  echo "no GPU or no gpu_engine_bench: engine rows skipped" | tee -a "$LOG"
fi

# ---------------------------------------------------------------------------------------------
section "mount: $STREAMS streams of $STREAM_MIB MiB, write then read, daemon CPU per GB"
: > "$OUT/mount.txt"
hz=$(getconf CLK_TCK)
daemon_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# mount_vault WORK ENGINE GPUS: init a vault in WORK/cipher and mount it on WORK/plain; prints the
# daemon's pid. The backing folder is in /dev/shm, so the disk does not set the pace.
mount_vault() {
  local work=$1 engine=$2 gpus=$3 args=()
  rm -rf "$work"; mkdir -p "$work/cipher" "$work/plain"
  echo "device-run-password" > "$work/pass"
  local init=(init --passfile "$work/pass" --scrypt-logn 12)
  [ -n "${CHUNK:-}" ] && init+=(--chunk-size "$CHUNK")
  timeout 30 "$BIN/gpucryptfs" "${init[@]}" "$work/cipher" > /dev/null || { echo "init failed" >&2; return 1; }
  [ -n "$gpus" ] && args+=(--gpus "$gpus")
  timeout 60 "$BIN/gpucryptfs" mount --passfile "$work/pass" --engine "$engine" "${args[@]}" --log "$work/daemon.log" \
    "$work/cipher" "$work/plain" >&2 || {
      echo "mount failed; daemon log tail:" >&2; tail -5 "$work/daemon.log" 2>/dev/null | sed 's/^/    /' >&2
      unmount_vault "$work"; return 1; }
  # The daemon logs "gpucryptfs[PID] info: mounted on ..." before `mount` returns: take the pid
  # from its own log (no pattern over command lines, which labels or paths could confuse).
  local pid
  pid=$(grep -F 'info: mounted on ' "$work/daemon.log" 2>/dev/null | tail -1 | sed -n 's/.*gpucryptfs\[\([0-9]*\)\].*/\1/p')
  if [ -z "$pid" ] || [ ! -d "/proc/$pid" ]; then
    echo "mounted, but no daemon pid in $work/daemon.log; its tail:" >&2; tail -5 "$work/daemon.log" 2>/dev/null | sed 's/^/    /' >&2
    unmount_vault "$work"; return 1
  fi
  echo "$pid"
}
# unmount_vault WORK: unmounts WORK/plain if mounted (also on failure paths) and removes WORK.
unmount_vault() {
  local work=$1
  if mountpoint -q "$work/plain" 2>/dev/null; then
    timeout 30 umount "$work/plain" 2>/dev/null || timeout 30 fusermount3 -u "$work/plain" 2>/dev/null ||
      umount -l "$work/plain" 2>/dev/null
    sleep 0.5
  fi
  mountpoint -q "$work/plain" 2>/dev/null && { echo "could not unmount $work/plain; left in place" >&2; return 1; }
  rm -rf "$work"
}
# work_dir PREFIX LABEL: a folder name from a label like gpu[0] or auto/again (no brackets, slashes).
work_dir() { echo "/dev/shm/$1-$(printf '%s' "$2" | tr -c 'A-Za-z0-9_.-' '_')"; }
stream_run() {  # label engine gpus
  local label=$1 engine=$2 gpus=$3 work pid i
  work=$(work_dir gcfs-m "$label")
  pid=$(mount_vault "$work" "$engine" "$gpus") || { echo "stream8 $label: $(mount_vault_error)"; return; }
  local c0 c1 c2 t0 t1 t1b t2 verdict=verified
  c0=$(daemon_ticks "$pid"); t0=$(date +%s.%N)
  for i in $(seq 1 $STREAMS); do
    timeout "$(limit 60)" dd if="/dev/shm/gcfs-src$i" of="$work/plain/f$i" bs=1M conv=fsync status=none &
  done
  wait
  t1=$(date +%s.%N); c1=$(daemon_ticks "$pid")
  timeout 60 sync; echo 3 > /proc/sys/vm/drop_caches
  t1b=$(date +%s.%N); c1=$(daemon_ticks "$pid")
  for i in $(seq 1 $STREAMS); do timeout "$(limit 60)" dd if="$work/plain/f$i" of=/dev/null bs=1M status=none & done
  wait
  t2=$(date +%s.%N); c2=$(daemon_ticks "$pid")
  local cw=$((c1 - c0)) cr=$((c2 - c1))
  for i in $(seq 1 $STREAMS); do timeout 60 cmp -s "/dev/shm/gcfs-src$i" "$work/plain/f$i" || verdict=MISMATCH; done
  awk -v l="$label" -v n=$STREAMS -v mib="$STREAM_MIB" -v w0="$t0" -v w1="$t1" -v r0="$t1b" -v r1="$t2" -v hz="$hz" \
      -v cw="$cw" -v cr="$cr" -v v="$verdict" \
    'BEGIN { gb = n * mib * 1048576 / 1e9;
             printf "stream8 %-10s write %6.2f GB/s at %.3f daemon CPU s/GB | read %6.2f GB/s at %.3f s/GB | %s\n",
                    l, gb / (w1 - w0), cw / hz / gb, gb / (r1 - r0), cr / hz / gb, v }'
  grep -m2 -i -E 'engine|failed|retired' "$work/daemon.log" | sed "s/^/  [$label log] /"
  unmount_vault "$work"
}
mount_vault_error() { echo "could not init or mount (the reason and the daemon log tail are above)"; }
if [ -e /dev/fuse ] && have gpucryptfs; then
  if enough 60; then
    for i in $(seq 1 $STREAMS); do head -c $((STREAM_MIB << 20)) /dev/urandom > "/dev/shm/gcfs-src$i"; done
    runs=("cpu cpu -")
    if ((NGPU > 0)); then runs+=("gpu[0] gpu 0" "auto[0] auto 0"); fi
    if ((NGPU > 1)); then runs+=("gpu[all] gpu $ALL_GPUS" "auto[all] auto $ALL_GPUS"); fi
    # MOUNT_RUNS="label:engine:gpus ...": these rows instead, in this order (gpus '-' for none),
    # for A/B rounds such as "gpu[0]:gpu:0 gpu[all]:gpu:0,1 gpu[0]/2:gpu:0 gpu[all]/2:gpu:0,1".
    if [ -n "${MOUNT_RUNS:-}" ]; then runs=(); for r in $MOUNT_RUNS; do runs+=("${r//:/ }"); done; fi
    for r in "${runs[@]}"; do
      read -r label engine gpus <<< "$r"
      [ "$gpus" = - ] && gpus=
      enough 30 || break
      stream_run "$label" "$engine" "$gpus" 2>&1 | tee -a "$OUT/mount.txt"
    done
    rm -f /dev/shm/gcfs-src*
  fi
else
  echo "no /dev/fuse or no gpucryptfs: mount rows skipped" | tee -a "$OUT/mount.txt"
fi

# ---------------------------------------------------------------------------------------------
section "mount: small files (untar, read the tree, rm -rf), cpu beside auto"
small_run() {  # label engine gpus tarball
  local label=$1 engine=$2 gpus=$3 tarball=$4 work pid
  work=$(work_dir gcfs-s "$label")
  pid=$(mount_vault "$work" "$engine" "$gpus") || { echo "small $label: $(mount_vault_error)"; return; }
  local c0 c1 c2 c3 t0 t1 t2 t3 bytes
  c0=$(daemon_ticks "$pid"); t0=$(date +%s.%N)
  timeout "$(limit 90)" tar -C "$work/plain" -xf "$tarball"
  timeout 60 sync; t1=$(date +%s.%N); c1=$(daemon_ticks "$pid")
  echo 3 > /proc/sys/vm/drop_caches
  t1=$(date +%s.%N); c1=$(daemon_ticks "$pid")
  bytes=$(timeout "$(limit 90)" tar -C "$work/plain" -cf - . | wc -c)
  t2=$(date +%s.%N); c2=$(daemon_ticks "$pid")
  timeout "$(limit 90)" rm -rf "$work/plain/tree"
  t3=$(date +%s.%N); c3=$(daemon_ticks "$pid")
  awk -v l="$label" -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v hz="$hz" -v x=$((c1 - c0)) -v y=$((c2 - c1)) \
      -v z=$((c3 - c2)) -v n="$bytes" \
    'BEGIN { printf "small   %-10s untar %6.2f s (daemon CPU %.2f s) | read tree %6.2f s (%.2f, %d bytes) | rm -rf %6.2f s (%.2f)\n",
                    l, b - a, x / hz, c - b, y / hz, n, d - c, z / hz }'
  unmount_vault "$work"
}
if [[ ${SKIP_SMALL:-0} != 1 ]] && [ -e /dev/fuse ] && have gpucryptfs && enough 60; then
  tree_src=
  for d in /usr/include /usr/local/cuda/include /usr/share/doc; do
    [ -d "$d" ] && [ "$(find "$d" -type f 2>/dev/null | head -3000 | wc -l)" -ge 3000 ] && { tree_src=$d; break; }
  done
  if [ -n "$tree_src" ]; then
    rm -rf /dev/shm/gcfs-tree-src; mkdir -p /dev/shm/gcfs-tree-src
    timeout "$(limit 60)" cp -a "$tree_src" /dev/shm/gcfs-tree-src/tree 2>/dev/null
    timeout "$(limit 60)" tar -C /dev/shm/gcfs-tree-src -cf /dev/shm/gcfs-tree.tar tree
    echo "tree: $tree_src, $(find /dev/shm/gcfs-tree-src/tree | wc -l) entries, $(du -sh /dev/shm/gcfs-tree-src/tree | cut -f1)" | tee -a "$OUT/mount.txt"
    rm -rf /dev/shm/gcfs-tree-src
    for r in "cpu cpu -" "auto[all] auto $ALL_GPUS" "cpu/again cpu -" "auto/again auto $ALL_GPUS"; do
      read -r label engine gpus <<< "$r"
      [ "$gpus" = - ] && gpus=
      ((NGPU == 0)) && [ "$engine" = auto ] && continue
      enough 40 || break
      small_run "$label" "$engine" "$gpus" /dev/shm/gcfs-tree.tar 2>&1 | tee -a "$OUT/mount.txt"
    done
    rm -f /dev/shm/gcfs-tree.tar
  else
    echo "no folder of at least 3000 files to untar: small-file rows skipped" | tee -a "$OUT/mount.txt"
  fi
fi

# ---------------------------------------------------------------------------------------------
if [[ ${EXTRA:-0} == 1 ]]; then
  section "EXTRA: full gpu_engine_bench --quick and gpucryptfs bench --quick"
  if enough 120; then timeout "$(limit 170)" "$BIN/gpu_engine_bench" --quick >> "$LOG" 2>&1; echo "bench exit: $?" | tee -a "$LOG"; fi
  if enough 60; then
    mkdir -p /tmp/gcfs-bench
    timeout "$(limit 120)" "$BIN/gpucryptfs" bench --quick --out /tmp/gcfs-bench >> "$LOG" 2>&1
    echo "gpucryptfs bench exit: $?" | tee -a "$LOG"
  fi
fi

# ---------------------------------------------------------------------------------------------
section "summary"
{
  echo "device run of $(date -u +%FT%TZ), binaries of $(head -1 "$BIN/BUILD_INFO" 2>/dev/null || echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"), $NGPU GPU(s), $(nproc) cpus, $(( SECONDS - START )) s"
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader 2>/dev/null | sed 's/^/  gpu /'
  echo "tests:"
  grep -E '^== .* exit |^\[  (PASSED|FAILED) |^\[  FAILED  \]|^== .*--engine' "$OUT/tests.txt" 2>/dev/null | sed 's/^/  /' | head -60
  echo "engine rows, GB/s (CPU s/GB); [0] = GPU 0 alone (CUDA_VISIBLE_DEVICES=0), [${ALL_GPUS//,/+}] = every GPU:"
  awk -F, '
    { key = $2 " " $4; eng = $3; if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
      if (!((key, eng) in val)) { val[key, eng] = sprintf("%.1f (%.3f)", $5, $7); gbs[key, eng] = $5 }
      if (!(eng in seen_eng)) { seen_eng[eng] = 1; engs[++ne] = eng } }
    END {
      for (k = 1; k <= nk; k++) {
        key = keys[k]; line = sprintf("  %-52s", key)
        for (e = 1; e <= ne; e++) if ((key, engs[e]) in val) line = line sprintf(" %s %s", engs[e], val[key, engs[e]])
        print line
        c = gbs[key, "cpu"]
        for (e = 1; e <= ne; e++) {
          split(engs[e], part, "["); one = part[1] "[0]"
          if (engs[e] ~ /\+/ && gbs[key, one] > 0) printf "      %s / %s = %.2fx\n", engs[e], one, gbs[key, engs[e]] / gbs[key, one]
          if (engs[e] ~ /^auto\[/) {
            n = substr(engs[e], 5); g = gbs[key, "gpu" n]; best = (g > c ? g : c)
            if (best > 0) printf "      %s / best of cpu and gpu%s = %.2fx\n", engs[e], n, gbs[key, engs[e]] / best
          }
        }
      }
    }' "$OUT/engine.csv" 2>/dev/null
  grep -h 'after the runs' "$LOG" | sed 's/^/  /'
  echo "mount rows:"
  grep -E '^(stream8|small|tree:)' "$OUT/mount.txt" 2>/dev/null | sed 's/^/  /'
} > "$OUT/summary.txt" 2>&1
tee -a "$LOG" < "$OUT/summary.txt"
rm -rf /tmp/gcfs-integration /tmp/gcfs-shapes.txt
ls -l "$OUT"
