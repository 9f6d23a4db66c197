#!/bin/bash
# gpucryptfs beside its peers, the whole table of docs/BENCHMARKS.md in one run: the shared
# bench/compare.sh (one and T streams, random 4 KiB and 128 KiB O_DIRECT I/O, a tree of small
# files) on plain FUSE, gocryptfs, securefs and gpucryptfs, then bench/table.py's table with
# gpucryptfs's ratio to the best peer on every row and the daemons' CPU seconds.
#
#   scripts/bench/compare_peers.sh [OUTDIR]        (needs root; default OUTDIR: /tmp/gcfs-compare)
#
# On the development machine (2 vCPUs) it sizes the run for two cores (T=4, small streams); on a
# larger one it uses compare.sh's defaults (T=8, 2 GiB and 8 x 512 MiB). Any of compare.sh's knobs
# (FSLIST, W1, WP, T, RS, ROOT) set in the environment wins. The GPU machine has none of the
# peers: there, run the folder this script fills (TOOLS) with compare.sh directly, or with
# scripts/bench/compare_peers_gpu_machine.sh copied into it; GPUCRYPTFS_BIN names a statically
# linked binary (scripts/build_for_device.sh) to put in it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
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
# rows then time less work than the others (the development VM: 20000 against 24,443 entries of
# /usr/include). There the run uses the first entries of /usr/include that fit, as compare.sh's
# tree (it keeps one it finds at $tree), and puts the tree that was there back afterwards.
tree=/dev/shm/tree.tar
if [[ " $FSLIST " == *" fuse"* ]]; then
  limit=$(ulimit -Hn)
  entries=$( [[ -f $tree ]] && tar -tf "$tree" | wc -l || find /usr/include | wc -l)
  if ((limit < entries + 3000)); then
    fits=$((limit - 3000))
    [[ -f $tree ]] && mv "$tree" "$tree.kept.$$"
    trap '[[ -f "'"$tree.kept.$$"'" ]] && mv -f "'"$tree.kept.$$"'" "'"$tree"'" || rm -f "'"$tree"'"' EXIT
    # find lists a folder before what it holds: its first entries are a whole tree.
    # (awk reads the whole list: head would end find with SIGPIPE, which pipefail makes fatal.)
    (cd /usr && find include | awk -v n="$fits" 'NR <= n' | tar --no-recursion -cf "$tree" -T - 2>/dev/null)
    echo "compare_peers: the descriptor limit ($limit) is below the tree's $entries entries, which passthrough_hp" \
         "would not hold: this run untars the first $fits entries of /usr/include" >&2
  fi
fi
log=$out/compare.log
echo "compare_peers: $(nproc) cpus, gpucryptfs $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), log in $log" >&2
"$tools/compare.sh" "$tools" | tee "$log"
echo
python3 "$bench/table.py" "$log" gcfs_auto | tee "$out/table.txt"
