#!/bin/bash
# Puts gpucryptfs beside its peers in one run: shared/bench/peers.sh mounts the backing folder,
# bindfs (plain FUSE passthrough), gocryptfs, securefs, cryfs and encfs and runs fsbench.sh on each;
# this script then runs the same fsbench.sh on gpucryptfs (cpu engine, or $ENGINE) over the same
# kind of backing folder. Prints every figure and, last, each peer's figures as ratios to
# gpucryptfs's. Needs the peers' Debian packages (installed here if missing) and a built binary.
# Usage: compare_peers.sh [PEERS]   (PEERS as peers.sh takes them; default all)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$root/../shared/bench}
bin=${BUILD_DIR:-$root/build}/mount/gpucryptfs
engine=${ENGINE:-cpu}
export PEERS_ROOT=${PEERS_ROOT:-/tmp/peers} FSBENCH_MB=${FSBENCH_MB:-512}
[[ -x $bin ]] || { echo "build gpucryptfs first (scripts/build.sh)" >&2; exit 1; }
[[ -x $bench/peers.sh ]] || { echo "no peers.sh under $bench (set BENCH_DIR)" >&2; exit 1; }
need=(gocryptfs securefs cryfs encfs bindfs fio bc)
missing=(); for p in "${need[@]}"; do command -v "$p" >/dev/null || missing+=("$p"); done
((${#missing[@]})) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null

out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bench/peers.sh" "${1:-all}" | tee "$out"

g=$PEERS_ROOT/gpucryptfs
mkdir -p "$g.c" "$g.plain"
echo "fsbench-password-1" > "$g.pw"
"$bin" init --passfile "$g.pw" --scrypt-logn 10 "$g.c" >/dev/null
mnt="$bin mount --passfile $g.pw --engine $engine $g.c $g.plain"
eval "$mnt"
"$bench/fsbench.sh" gpucryptfs "$g.plain" "fusermount3 -u $g.plain; $mnt" | tee -a "$out"
fusermount3 -u "$g.plain"

echo
echo "ratios: each filesystem's figure divided by gpucryptfs's (MB/s and IOPS: below 1 is slower than gpucryptfs; seconds: above 1 is slower)"
awk '$2 != "seq_verify" { v[$1" "$2] = $3; names[$1] = 1; figs[$2] = 1 }
     END { for (n in names) { line = sprintf("%-12s", n);
             for (f in figs) if ((n" "f) in v && ("gpucryptfs "f) in v && v["gpucryptfs "f] > 0)
               line = line sprintf(" %s=%.2f", f, v[n" "f] / v["gpucryptfs "f]);
             print line } }' "$out" | sort
