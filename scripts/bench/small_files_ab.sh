#!/bin/bash
# The tree-of-small-files rows of bench/compare.sh (untar of /usr/include, stat of every file,
# read of every file, rm -rf; plus find -ls) for several gpucryptfs binaries side by side: each
# round makes a fresh vault per binary, in turn, so that two builds meet the same machine load.
# Prints per round and binary: wall ms and the daemon's CPU ms for each phase. Caches are dropped
# between phases, and the daemon is given a second to take the FORGETs that follow before the
# next phase's CPU is counted.
#
#   scripts/bench/small_files_ab.sh BIN [BIN...]       (needs root)
#
# Knobs (environment): ROUNDS (default 3), TRANSPORT (uring, the default, or classic), ROOT (default
# /dev/shm/smallfiles: tmpfs, so that only the filesystems differ), TAR (default /dev/shm/tree.tar,
# made from /usr/include as compare.sh makes it), MOUNT_ARGS (more mount options).
# A benchmark, never a pass/fail test: compare within one run, and repeat before believing a small
# difference.
set -u
(($# >= 1)) || { sed -n 2,14p "$0"; exit 2; }
[[ $(id -u) == 0 ]] || { echo "small_files_ab: needs root (it drops caches and mounts)" >&2; exit 1; }
rounds=${ROUNDS:-3} transport=${TRANSPORT:-uring} root=${ROOT:-/dev/shm/smallfiles} tar=${TAR:-/dev/shm/tree.tar}
[[ $transport == uring ]] && echo 1 > /sys/module/fuse/parameters/enable_uring
[[ -f $tar ]] || tar -C /usr -cf "$tar" include 2>/dev/null
hz=$(getconf CLK_TCK)
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
echo "== $(date -u +%FT%TZ) $(nproc) cpus, kernel $(uname -r), transport $transport, $(tar -tf "$tar" | wc -l) entries"
for round in $(seq 1 "$rounds"); do
  for n in $(seq 1 $#); do
    bin=${!n}
    rm -rf "$root"; mkdir -p "$root/c" "$root/m"; echo "small-files-password" > "$root/pw"
    "$bin" init --passfile "$root/pw" --scrypt-logn 10 "$root/c" > /dev/null || exit 1
    # shellcheck disable=SC2086
    "$bin" mount --passfile "$root/pw" --transport "$transport" --log "$root/log" ${MOUNT_ARGS:-} "$root/c" "$root/m" || exit 1
    pid=$(pgrep -n -f "mount .*$root/c")
    line="round $round bin $n"
    phase() {  # label command
      local label=$1 c0 c1 t0 t1
      shift
      c0=$(cpu_ticks "$pid"); t0=$(date +%s%N)
      bash -c "$*"
      t1=$(date +%s%N); c1=$(cpu_ticks "$pid")
      line="$line | $label $(((t1 - t0) / 1000000)) ms $(((c1 - c0) * 1000 / hz)) cpu_ms"
    }
    phase untar "tar -C '$root/m' -xf '$tar'"; drop
    phase stat "find '$root/m/include' -type f -print0 | xargs -0 stat -c %s > /dev/null"; drop
    phase find_ls "find '$root/m/include' -ls > /dev/null"; drop
    phase read "find '$root/m/include' -type f -print0 | xargs -0 cat > /dev/null"
    phase rm "rm -rf '$root/m/include'"
    fusermount3 -u "$root/m" || umount "$root/m"
    sleep 1
    echo "$line"
  done
done
rm -rf "$root"
