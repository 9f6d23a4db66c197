#!/usr/bin/env bash
# Runs ON the GPU device machine, from the repository root, with the binaries that
# scripts/build_for_device.sh left in build-device/carry (carry that folder with the run).
# Runs the GPU tests, the mounted-vault integration suites with the gpu engine over both FUSE
# transports (in parallel with the GPU tests, before any timing), the benchmarks, and a real mount
# with the gpu and cpu engines over /dev/fuse and over io_uring (write, read, verify, daemon CPU
# time per GB). FUSE's io_uring switch is turned on for the run and put back afterwards. Everything goes under $OUT (at most 8 files come
# back: env, sass, tests, integration, bench, mount, summary, and the bench folder's files); a
# short table is printed last. Timeouts keep the whole run under the device's 10-minute limit.
#
#   usage: scripts/gpu_device_run.sh [--quick]
#   BENCH_ARGS: arguments for `gpucryptfs bench` (default --quick, which fits the time limit)
#   BENCH_TIMEOUT: seconds allowed to `gpucryptfs bench` (default 120)
#   BENCH_ONLY=1: the environment and the benchmarks only; with BENCH_ARGS= BENCH_TIMEOUT=540 this
#     is the full sweep of docs/EXPERIMENTS.md, which needs a call of its own
set -uo pipefail
BIN=${BIN:-build-device/carry}
OUT=${OUT:-$PWD/gpu-run-out}
QUICK=${1:-}
mkdir -p "$OUT"
export PATH="$PATH:/usr/local/cuda/bin"

section() { echo; echo "== $*"; }

# FUSE over io_uring (Linux 6.14+) is off until root turns it on: on for this run, back after.
uring_switch=/sys/module/fuse/parameters/enable_uring
uring_before=
if [ -w "$uring_switch" ]; then
  uring_before=$(cat "$uring_switch")
  echo 1 > "$uring_switch"
  trap '[ "$uring_before" = Y ] || echo 0 > "$uring_switch"' EXIT
fi
transports="classic"
[ -n "$uring_before" ] && transports="classic uring"

section "environment"
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv 2>&1
  echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "kernel: $(uname -r)"
  echo "fuse io_uring switch: ${uring_before:-absent} before this run (transports: $transports)"
  echo "fuse max_pages_limit: $(cat /proc/sys/fs/fuse/max_pages_limit 2>/dev/null || echo absent)"
  if [ -e /dev/fuse ]; then echo "/dev/fuse: present"; else echo "/dev/fuse: ABSENT"; fi
  ls "$BIN"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [[ ${BENCH_ONLY:-0} != 1 ]]; then
section "SASS of the kernels (instruction counts; local memory must be zero)"
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$BIN/gpu_engine_bench" > /tmp/sass_all.txt 2>&1
  awk '/Function :/ { if (name) printf "%-60s LDS=%d PRMT=%d LOP3=%d SHFL=%d LDG=%d STG=%d LDL=%d STL=%d\n", name, lds, prmt, lop, shfl, ldg, stg, ldl, stl;
                      name=$3; lds=prmt=lop=shfl=ldg=stg=ldl=stl=0; next }
       / LDS/ {lds++} / PRMT/ {prmt++} / LOP3/ {lop++} / SHFL/ {shfl++} / LDG/ {ldg++} / STG/ {stg++} / LDL/ {ldl++} / STL/ {stl++}
       END { if (name) printf "%-60s LDS=%d PRMT=%d LOP3=%d SHFL=%d LDG=%d STG=%d LDL=%d STL=%d\n", name, lds, prmt, lop, shfl, ldg, stg, ldl, stl }' \
      /tmp/sass_all.txt > "$OUT/sass.txt"
  # One round of the coarse kernel for the record: the lookups should read LDS [R+imm].
  grep -m1 -A400 'ctr_coarseILi4' /tmp/sass_all.txt | grep -m40 -E 'LDS|PRMT' >> "$OUT/sass.txt"
  cat "$OUT/sass.txt" | head -20
else
  echo "cuobjdump not found" | tee "$OUT/sass.txt"
fi

section "tests (GPU tests, and the mount suites with --engine gpu alongside)"
# The integration suites drive a real mount through tests/support/mounted_vault.h, which reads
# GPUCRYPTFS_TEST_ENGINE and GPUCRYPTFS_TEST_BIN; they run in parallel (each in its own temporary
# folders), while the GPU tests run, so they cost no extra wall time. No timing happens meanwhile.
integ_dir=/tmp/gcfs-integration; rm -rf "$integ_dir"; mkdir -p "$integ_dir"
integ_pids=()
if [ -e /dev/fuse ]; then
  for tr in $transports; do
    for t in "$BIN"/integration_*_test "$BIN"/volume_mount_test; do
      [ -x "$t" ] || continue
      log="$integ_dir/$(basename "$t").$tr.log"
      ( GPUCRYPTFS_TEST_ENGINE=gpu GPUCRYPTFS_TEST_TRANSPORT=$tr GPUCRYPTFS_TEST_BIN="$PWD/$BIN/gpucryptfs" \
          LD_LIBRARY_PATH="$PWD/$BIN/lib" timeout 170 "$t" > "$log" 2>&1; echo "exit $?" >> "$log" ) &
      integ_pids+=($!)
    done
  done
fi
{
  timeout 60 "$BIN/gpu_math_test" 2>&1 | tail -5
  timeout 170 "$BIN/gpu_engine_test" 2>&1
  # Freed device buffers hold no key or plaintext (docs/SECURITY.md, "Key material in memory").
  [ -x "$BIN/gpu_buffers_test" ] && timeout 60 "$BIN/gpu_buffers_test" 2>&1
} > "$OUT/tests.txt"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |FAILED|tests ran' "$OUT/tests.txt"
for p in "${integ_pids[@]}"; do wait "$p"; done
{
  echo "fusermount3: $(command -v fusermount3 || echo "absent (the fixture unmounts with umount)")"
  for f in "$integ_dir"/*.log; do
    [ -e "$f" ] || { echo "no integration suites ran (no /dev/fuse, or none carried)"; break; }
    echo "== $(basename "$f" .log): $(grep -E '^\[  (PASSED|FAILED) ' "$f" | tr '\n' ' ') $(tail -1 "$f")"
    grep -E '^\[  FAILED  \]' "$f" | head -20
  done
  for f in "$integ_dir"/*.log; do [ -e "$f" ] && { echo; echo "#### $(basename "$f")"; grep -v -E '^\[ +(OK|RUN) ' "$f" | tail -60; }; done
} > "$OUT/integration.txt" 2>&1
grep -E '^== |^fusermount3|^no integration' "$OUT/integration.txt"

fi

section "benchmarks"
timeout 170 "$BIN/gpu_engine_bench" $QUICK > "$OUT/bench.txt" 2>&1
echo "bench exit: $?"
mkdir -p "$OUT/bench"; timeout "${BENCH_TIMEOUT:-120}" "$BIN/gpucryptfs" bench ${BENCH_ARGS---quick} --out "$OUT/bench" > "$OUT/bench/table.txt" 2> "$OUT/bench/progress.txt"; echo "gpucryptfs bench exit: $? (table, CSV, bench.gp in \$OUT/bench)"

if [[ ${BENCH_ONLY:-0} != 1 ]]; then
section "mount with the gpu and cpu engines"
mount_run() {  # engine size_mib transport
  local engine=$1 mib=$2 tr=$3 work=/tmp/gcfs-$1-$3
  rm -rf "$work"; mkdir -p "$work/cipher" "$work/plain"
  echo "device-run-password" > "$work/pass"
  "$BIN/gpucryptfs" init --passfile "$work/pass" --scrypt-logn 12 "$work/cipher" >/dev/null || { echo "$engine: init failed"; return; }
  "$BIN/gpucryptfs" mount --passfile "$work/pass" --engine "$engine" --transport "$tr" --log "$work/daemon.log" \
    "$work/cipher" "$work/plain" || { echo "$engine $tr: mount failed"; tail -5 "$work/daemon.log"; return; }
  local pid; pid=$(pgrep -n -x gpucryptfs)
  head -c $((mib << 20)) /dev/urandom > "$work/src"
  # utime and stime of the daemon (all its threads), in clock ticks
  cpu_ticks() { awk '{print $14, $15}' "/proc/$pid/stat"; }
  # The same per thread name (request workers, engine pool, CUDA's own threads), to see who spends it
  thread_ticks() {
    for t in /proc/"$pid"/task/*; do
      printf '%s %s\n' "$(tr ' ' '_' < "$t/comm")" "$(awk '{print $14 + $15}' "$t/stat")"
    done | awk '{sum[$1] += $2; n[$1]++} END {for (k in sum) printf "%s(%d)=%d ", k, n[k], sum[k]; print ""}'
  }
  local hz; hz=$(getconf CLK_TCK)
  local u0 s0 u1 s1 u1b s1b u2 s2 t0 t1 t1b t2
  read -r u0 s0 < <(cpu_ticks); t0=$(date +%s.%N)
  dd if="$work/src" of="$work/plain/file" bs=1M conv=fsync status=none
  t1=$(date +%s.%N); read -r u1 s1 < <(cpu_ticks)
  local threads_after_write; threads_after_write=$(thread_ticks)
  sync; echo 3 > /proc/sys/vm/drop_caches
  t1b=$(date +%s.%N); read -r u1b s1b < <(cpu_ticks)
  dd if="$work/plain/file" of=/dev/null bs=1M status=none
  t2=$(date +%s.%N); read -r u2 s2 < <(cpu_ticks)
  local verdict=MISMATCH
  sync; echo 3 > /proc/sys/vm/drop_caches
  cmp -s "$work/src" "$work/plain/file" && verdict=verified
  awk -v e="${engine}_$tr" -v mib="$mib" -v w0="$t0" -v w1="$t1" -v r0="$t1b" -v r1="$t2" -v hz="$hz" -v v="$verdict" \
      -v uw=$((u1 - u0)) -v sw=$((s1 - s0)) -v ur=$((u2 - u1b)) -v sr=$((s2 - s1b)) \
    'BEGIN { gb = mib * 1048576 / 1e9;
             printf "mount_%s write %d MiB: %.2f GB/s, daemon cpu %.3f s/GB (user %.3f, sys %.3f) | read: %.2f GB/s, daemon cpu %.3f s/GB (user %.3f, sys %.3f) | %s\n",
                    e, mib, gb / (w1 - w0), (uw + sw) / hz / gb, uw / hz / gb, sw / hz / gb,
                    gb / (r1 - r0), (ur + sr) / hz / gb, ur / hz / gb, sr / hz / gb, v }'
  echo "  [$engine] CPU ticks per thread name (hz $hz), after the write: $threads_after_write"
  echo "  [$engine] and after the read: $(thread_ticks)"
  grep -m4 -i -E 'engine|gpu|transport' "$work/daemon.log" | sed "s/^/  [$engine log] /"
  umount "$work/plain" 2>/dev/null || fusermount3 -u "$work/plain" 2>/dev/null
  sleep 1
  rm -rf "$work"
}
{
  if [ -e /dev/fuse ]; then
    for tr in $transports; do
      mount_run gpu 1024 "$tr"
      mount_run cpu 1024 "$tr"
    done
  else
    echo "no /dev/fuse on this machine: the mount test cannot run"
  fi
} > "$OUT/mount.txt" 2>&1
cat "$OUT/mount.txt"

section "volume with the gpu and cpu engines (ext4 on a direct-I/O loop device)"
# The disk-volume experiment of docs/EXPERIMENTS.md: ext4 on volume.img through a loop device with
# direct I/O, four writers at once (the loop device then sends the daemon concurrent requests),
# then the same data read back with the caches dropped, e2fsck, and the daemon's CPU per GB.
volume_run() {  # engine mib_per_writer transport
  local engine=$1 mib=$2 tr=$3 work=/tmp/gcfs-vol-$1-$3 writers=4
  rm -rf "$work"; mkdir -p "$work/mnt" "$work/fs"
  echo "device-run-password" > "$work/pass"
  "$BIN/gpucryptfs" volume create --scrypt-logn 12 --size 16G --passfile "$work/pass" "$work/vol.gcv" >/dev/null \
    || { echo "vol_$engine: create failed"; return; }
  "$BIN/gpucryptfs" volume mount --engine "$engine" --transport "$tr" --passfile "$work/pass" --log "$work/daemon.log" "$work/vol.gcv" "$work/mnt" \
    || { echo "vol_$engine: mount failed"; tail -5 "$work/daemon.log"; return; }
  local pid; pid=$(pgrep -n -x gpucryptfs)
  mkfs.ext4 -q -F "$work/mnt/volume.img" || { echo "vol_$engine: mkfs failed"; fusermount3 -u "$work/mnt" 2>/dev/null || umount "$work/mnt"; return; }
  local loop; loop=$(losetup --direct-io=on -f --show "$work/mnt/volume.img")
  mount "$loop" "$work/fs"
  local i hz; hz=$(getconf CLK_TCK)
  for i in $(seq 1 $writers); do head -c $((mib << 20)) /dev/urandom > "/dev/shm/gcfs-src$i"; done
  local u0 s0 u1 s1 u2 s2 t0 t1 t2
  read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat"); t0=$(date +%s.%N)
  for i in $(seq 1 $writers); do dd if="/dev/shm/gcfs-src$i" of="$work/fs/f$i" bs=1M oflag=direct conv=fsync status=none & done; wait
  t1=$(date +%s.%N); read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  for i in $(seq 1 $writers); do dd if="$work/fs/f$i" of=/dev/null bs=1M iflag=direct status=none & done; wait
  t2=$(date +%s.%N); read -r u2 s2 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  local verdict=verified
  for i in $(seq 1 $writers); do cmp -s "/dev/shm/gcfs-src$i" "$work/fs/f$i" || verdict=MISMATCH; done
  umount "$work/fs"
  e2fsck -f -n "$loop" >/dev/null 2>&1 && verdict="$verdict, e2fsck clean" || verdict="$verdict, E2FSCK FAILED"
  losetup -d "$loop"
  awk -v e="${engine}_$tr" -v n=$writers -v mib="$mib" -v w0="$t0" -v w1="$t1" -v r1="$t2" -v hz="$hz" -v v="$verdict" \
      -v cw=$((u1 - u0 + s1 - s0)) -v cr=$((u2 - u1 + s2 - s1)) \
    'BEGIN { gb = n * mib * 1048576 / 1e9;
             printf "vol_%s %d writers x %d MiB, O_DIRECT through ext4 and loop: write %.2f GB/s, daemon cpu %.3f s/GB | read %.2f GB/s, daemon cpu %.3f s/GB | %s\n",
                    e, n, mib, gb / (w1 - w0), cw / hz / gb, gb / (r1 - w1), cr / hz / gb, v }'
  umount "$work/mnt" 2>/dev/null || fusermount3 -u "$work/mnt" 2>/dev/null
  sleep 1
  rm -rf "$work" /dev/shm/gcfs-src*
}
{
  if [ -e /dev/fuse ] && command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null; then
    for tr in $transports; do volume_run gpu 512 "$tr"; done
    volume_run cpu 512 classic
  else
    echo "no /dev/fuse, losetup or mkfs.ext4 on this machine: the volume run cannot run"
  fi
} > "$OUT/volume.txt" 2>&1
cat "$OUT/volume.txt"

fi

section "summary"
{
  head -3 "$OUT/env.txt"
  grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.txt"
  grep -E '^== ' "$OUT/integration.txt"
  sed -n '/^what /,$p' "$OUT/bench.txt"
  grep '^mount_' "$OUT/mount.txt"
  grep '^vol_' "$OUT/volume.txt"
} > "$OUT/summary.txt" 2>/dev/null  # BENCH_ONLY runs lack the test and mount files
cat "$OUT/summary.txt"

# At most 8 files come back from the device machine: one log with every section, the summary, and
# the bench folder's table, CSV, plot script and (where gnuplot exists) its two PNGs.
for f in env sass tests integration bench mount volume; do
  [ -e "$OUT/$f.txt" ] && { echo "######## $f.txt"; cat "$OUT/$f.txt"; }
done > "$OUT/run.log"
[ -e "$OUT/bench/progress.txt" ] && { echo "######## bench/progress.txt"; cat "$OUT/bench/progress.txt"; } >> "$OUT/run.log"
rm -f "$OUT"/env.txt "$OUT"/sass.txt "$OUT"/tests.txt "$OUT"/integration.txt "$OUT"/bench.txt "$OUT"/mount.txt "$OUT"/volume.txt \
      "$OUT"/bench/progress.txt
ls -R "$OUT"
