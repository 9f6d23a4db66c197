#!/bin/bash
# A stat-heavy scan of a large tree (`find DIR -ls`) on gpucryptfs beside its peers: N small files
# in a nested tree (directories of PER_DIR files, 100 such directories per top-level directory) are
# made through each mount, then every round drops the caches and times `find -ls` over the tree,
# with the daemon's CPU seconds. One filesystem is mounted at a time; each is removed afterwards.
#
#   scripts/bench/find_ls_large_tree.sh [N]          (needs root; N defaults to 100000)
#
# Knobs (environment):
#   FSLIST  default "gocryptfs gcfs_auto": backing (the folder itself), gocryptfs, securefs,
#           gcfs_ENGINE (gpucryptfs; gcfs_ENGINE+ARG1,ARG2 adds mount arguments), gcfsB_ENGINE
#           (the same with the binary GPUCRYPTFS_B: two builds side by side in one run)
#   ROUNDS  timed rounds per filesystem (default 3); ROOT the backing place (default
#           /dev/shm/treescan: tmpfs, so that only the filesystems differ); FILE_BYTES per file
#           (default 64); PER_DIR files per directory (default 1000: more than one READDIR
#           reply holds, as in real trees' larger directories); GPUCRYPTFS the binary (default build/mount/gpucryptfs);
#   COUNT=1 one more round under scripts/bench/fuse_request_counts.sh: FUSE requests per file.
# Prints one line per round: "FS find_ls | s=SECONDS files=N | daemon_cpu_s=CPU". A benchmark,
# never a pass/fail test: compare filesystems within one run and repeat before believing small
# differences.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
N=${1:-100000}
FSLIST=${FSLIST:-"gocryptfs gcfs_auto"}
ROUNDS=${ROUNDS:-3}
ROOT=${ROOT:-/dev/shm/treescan}
FILE_BYTES=${FILE_BYTES:-64}
PER_DIR=${PER_DIR:-1000}
GPUCRYPTFS=${GPUCRYPTFS:-$here/../../build/mount/gpucryptfs}
[[ $(id -u) == 0 ]] || { echo "find_ls_large_tree: needs root (drops caches, mounts)" >&2; exit 1; }
HZ=$(getconf CLK_TCK)
mkdir -p "$ROOT"
pw=$ROOT/pw
echo "tree-scan-password-1" >"$pw"

ticks() { [[ -n $pid && -e /proc/$pid/stat ]] && awk '{print $14+$15}' "/proc/$pid/stat" || echo 0; }
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# N files of FILE_BYTES bytes under $1/tree: t<i>/d<j>/f<k>, PER_DIR files a directory.
make_tree() {
  python3 - "$1/tree" "$N" "$FILE_BYTES" "$PER_DIR" <<'PY'
import os, sys
top, n, size, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = b"x" * size
for i in range(n):
    d = f"{top}/t{i // (per * 100)}/d{i // per % 100}"
    if i % per == 0:
        os.makedirs(d, exist_ok=True)
    fd = os.open(f"{d}/f{i % per}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    if size:
        os.write(fd, data)
    os.close(fd)
PY
}

mount_fs() {  # fs c m: mounts, sets pid
  local fs=$1 c=$2 m=$3
  pid=
  case $fs in
    backing) return 0 ;;
    gocryptfs)
      gocryptfs -q -init -passfile "$pw" -scryptn 10 "$c" >/dev/null 2>&1
      gocryptfs -q -passfile "$pw" "$c" "$m" ;;
    securefs)
      securefs create --pass "$(cat "$pw")" "$c" >/dev/null 2>&1
      securefs mount -b --pass "$(cat "$pw")" "$c" "$m" >/dev/null 2>&1
      sleep 1 ;;
    gcfs_* | gcfsB_*)
      local spec=${fs#*_} engine extra= bin=$GPUCRYPTFS
      [[ $fs == gcfsB_* ]] && bin=${GPUCRYPTFS_B:?gcfsB_ needs GPUCRYPTFS_B}
      engine=${spec%%+*}
      [[ $spec == *+* ]] && extra=${spec#*+}
      "$bin" init --passfile "$pw" --scrypt-logn 10 "$c" >/dev/null
      # shellcheck disable=SC2086  # extra arguments, comma-separated
      "$bin" mount --passfile "$pw" --engine "$engine" ${extra//,/ } --log "$ROOT/$fs.log" "$c" "$m" ;;
    *) echo "find_ls_large_tree: unknown filesystem $fs" >&2; return 1 ;;
  esac
  mountpoint -q "$m" || { echo "$fs: mount failed" >&2; return 1; }
  # The daemon serving m: the newest process whose command line names it.
  pid=$(pgrep -n -f -- " $m\$" || pgrep -n -f -- "$m" || true)
}

echo "== $(date -u +%FT%TZ) $(nproc) cpus, kernel $(uname -r), N=$N PER_DIR=$PER_DIR FILE_BYTES=$FILE_BYTES ROOT=$ROOT" \
  "gpucryptfs $(git -C "$here/../.." rev-parse --short HEAD 2>/dev/null || echo '?')"
for fs in $FSLIST; do
  c=$ROOT/$fs.c m=$ROOT/$fs.m
  rm -rf "$c" "$m"
  mkdir -p "$c" "$m"
  mount_fs "$fs" "$c" "$m" || continue
  dir=$m
  [[ $fs == backing ]] && dir=$c
  t0=$(now_ms)
  make_tree "$dir"
  echo "$fs make_tree | s=$(awk -v t=$(($(now_ms) - t0)) 'BEGIN{printf "%.2f", t/1000}') files=$N"
  for ((r = 1; r <= ROUNDS; r++)); do
    drop
    c0=$(ticks)
    t0=$(now_ms)
    find "$dir/tree" -ls >/dev/null
    t1=$(now_ms)
    c1=$(ticks)
    echo "$fs find_ls | s=$(awk -v t=$((t1 - t0)) 'BEGIN{printf "%.2f", t/1000}') files=$N |" \
      "daemon_cpu_s=$(awk -v t=$((c1 - c0)) -v hz="$HZ" 'BEGIN{printf "%.2f", t/hz}')"
  done
  if [[ ${COUNT:-0} == 1 && $fs != backing ]]; then
    drop
    echo "$fs requests of one find -ls, per file:"
    MNT=$m PER=$N "$here/fuse_request_counts.sh" find "$dir/tree" -ls 2>/dev/null | sed 's/^/    /'
  fi
  [[ $fs == backing ]] || fusermount3 -u "$m" 2>/dev/null || umount "$m"
  sleep 1
  rm -rf "$c" "$m"
done
