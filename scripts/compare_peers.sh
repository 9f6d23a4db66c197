#!/bin/bash
# gpucryptfs beside its peers, the whole table of docs/BENCHMARKS.md in one run: the shared
# bench/compare.sh (one and T streams, random 4 KiB and 128 KiB O_DIRECT I/O, a tree of small
# files) on plain FUSE, gocryptfs, securefs and gpucryptfs, then bench/table.py's table with
# gpucryptfs's ratio to the best peer on every row and the daemons' CPU seconds.
#
#   scripts/compare_peers.sh [OUTDIR]        (needs root; default OUTDIR: /tmp/gcfs-compare)
#
# On the development machine (2 vCPUs) it sizes the run for two cores (T=4, small streams); on a
# larger one it uses compare.sh's defaults (T=8, 2 GiB and 8 x 512 MiB). Any of compare.sh's knobs
# (FSLIST, W1, WP, T, RS, ROOT) set in the environment wins. The GPU machine has none of the
# peers: there, run the folder this script fills (TOOLS) with compare.sh directly, as
# scripts/gpu_device_run.sh's notes say; GPUCRYPTFS_BIN names a statically linked binary
# (scripts/build_for_device.sh) to put in it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$root/../shared/bench}
out=${1:-/tmp/gcfs-compare}
bin=${GPUCRYPTFS_BIN:-${BUILD_DIR:-$root/build}/mount/gpucryptfs}
[[ -x $bin ]] || { echo "compare_peers: build gpucryptfs first (scripts/build.sh)" >&2; exit 1; }
[[ -x $bench/compare.sh ]] || { echo "compare_peers: no compare.sh under $bench (set BENCH_DIR)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "compare_peers: needs root (it drops caches and mounts)" >&2; exit 1; }

mkdir -p "$out"
tools=$out/tools
"$bench/gather_tools.sh" "$tools" "$bin" >/dev/null
if (($(nproc) <= 4)); then
  export W1=${W1:-512} WP=${WP:-256} T=${T:-4} RS=${RS:-3}
fi
export FSLIST=${FSLIST:-"fuse gocryptfs securefs gcfs_auto gcfs_cpu"}
# passthrough_hp (fuse, fuse_uring) holds a descriptor for every file the kernel knows: where the
# descriptor limit is below the tree's entries it untars only part of it (EMFILE), and its tree
# rows then time less work than the others. Say so before the run, not after.
tree=/dev/shm/tree.tar
if [[ " $FSLIST " == *" fuse"* ]]; then
  entries=$( [[ -f $tree ]] && tar -tf "$tree" | wc -l || find /usr/include | wc -l)
  if (($(ulimit -Hn) < entries + 1000)); then
    echo "compare_peers: warning: the descriptor limit ($(ulimit -Hn)) is below the tree's $entries entries:" \
         "passthrough_hp's tree rows (untar, stat, read, rm) will cover part of the tree only." \
         "Put a smaller tree at $tree (compare.sh keeps one it finds there)." >&2
  fi
fi
log=$out/compare.log
echo "compare_peers: $(nproc) cpus, gpucryptfs $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), log in $log" >&2
"$tools/compare.sh" "$tools" | tee "$log"
echo
python3 "$bench/table.py" "$log" gcfs_auto | tee "$out/table.txt"
