#!/bin/bash
# "read every file" (compare.sh's row) for two gpucryptfs binaries on one vault: the tree is
# untarred once through the first binary, then each pass mounts the same CIPHERDIR with A, then
# with B, drops the caches and reads every file with cat. Fewer moving parts than a fresh vault
# per binary (scripts/bench/small_files_ab.sh), so more passes fit in the same time.
# Prints per pass and binary: wall ms and the daemon's CPU ms.
#
#   scripts/bench/read_tree_ab.sh BIN_A BIN_B        (needs root)
#
# Knobs (environment): PASSES (default 6), TRANSPORT (uring, the default, or classic), ROOT
# (default /dev/shm/read_ab: tmpfs, so that only the filesystems differ), TAR (default
# /dev/shm/tree.tar, made from /usr/include as compare.sh makes it; its files must lie under
# include/). A benchmark, never a pass/fail test: compare within one run, and repeat.
set -u
(($# == 2)) || { sed -n 2,13p "$0"; exit 2; }
[[ $(id -u) == 0 ]] || { echo "read_tree_ab: needs root (it drops caches and mounts)" >&2; exit 1; }
a=$1 b=$2 passes=${PASSES:-6} root=${ROOT:-/dev/shm/read_ab} tar=${TAR:-/dev/shm/tree.tar} tr=${TRANSPORT:-uring}
[[ $tr == uring ]] && echo 1 > /sys/module/fuse/parameters/enable_uring
[[ -f $tar ]] || tar -C /usr -cf "$tar" include 2>/dev/null
hz=$(getconf CLK_TCK)
rm -rf "$root"; mkdir -p "$root/c" "$root/m"; echo "read-ab-password" > "$root/pw"
mnt() { "$1" mount --passfile "$root/pw" --transport "$tr" --log "$root/log" "$root/c" "$root/m" || exit 1; }
"$a" init --passfile "$root/pw" --scrypt-logn 10 "$root/c" > /dev/null || exit 1
mnt "$a"; tar -C "$root/m" -xf "$tar"; fusermount3 -u "$root/m"; sleep 0.5
echo "== $(date -u +%FT%TZ) $(nproc) cpus, kernel $(uname -r), transport $tr, $(find "$root/c" -type f | wc -l) backing files"
for p in $(seq 1 "$passes"); do
  for bin in "$a" "$b"; do
    mnt "$bin"
    pid=$(pgrep -n -f "mount .*$root/c")
    sync; echo 3 > /proc/sys/vm/drop_caches; sleep 0.5
    c0=$(awk '{print $14 + $15}' "/proc/$pid/stat"); t0=$(date +%s%N)
    find "$root/m/include" -type f -print0 | xargs -0 cat > /dev/null
    t1=$(date +%s%N); c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    echo "pass $p $bin | read $(((t1 - t0) / 1000000)) ms $(((c1 - c0) * 1000 / hz)) cpu_ms"
    fusermount3 -u "$root/m"; sleep 0.5
  done
done
rm -rf "$root"
