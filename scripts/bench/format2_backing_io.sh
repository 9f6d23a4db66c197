#!/bin/bash
# format2_backing_io.sh GPUCRYPTFS IOBENCH: format 1 against format 2 through the mount, with the
# backing folder on ext4 in a loop-mounted image in /dev/shm (disk semantics at memory speed, so
# O_DIRECT is real and the page cache of the backing filesystem is what it costs). For each vault
# (v1 buffered, v2 buffered, v2 direct): 1 and T streams of sequential write and read through the
# mount (iobench from shared/bench, every byte checked on read), then a tree of small files
# (untar of /usr/include, stat, read, rm) and the backing folder's du after the untar. One line per
# workload with MB/s and the daemon's CPU seconds (user + system) and CPU s/GB.
#   W1 (MiB, one stream, default 1024), WP (MiB per stream, default 256), T (streams, default 4),
#   IMG_MB (size of the ext4 image, default 6144), ENGINE (default cpu), CHUNK (default: init's),
#   CONFIGS (default "v1_buffered v2_buffered v2_direct"), REPEAT (default 1).
# Needs root (loop device, drop_caches). Timings on a shared machine are noisy: compare within one
# run and repeat. On the GPU machine (1 and 8 streams, engine gpu against cpu):
#   cc -O2 -pthread -o /tmp/iobench shared/bench/iobench.c
#   for e in cpu gpu; do ENGINE=$e W1=2048 WP=512 T=8 IMG_MB=16384 \
#     CONFIGS="v1_buffered v2_buffered v2_direct" scripts/bench/format2_backing_io.sh build/mount/gpucryptfs /tmp/iobench; done
set -u
BIN=$(readlink -f "$1") IOB=$(readlink -f "$2")
W1=${W1:-1024} WP=${WP:-256} T=${T:-4} IMG_MB=${IMG_MB:-6144} ENGINE=${ENGINE:-cpu}
CONFIGS=${CONFIGS:-"v1_buffered v2_buffered v2_direct"} REPEAT=${REPEAT:-1}
HZ=$(getconf CLK_TCK)
work=$(mktemp -d /dev/shm/gcfs-fmt2.XXXXXX)
img=$work/ext4.img mnt=$work/ext4
truncate -s ${IMG_MB}M $img && mkfs.ext4 -q -F $img && mkdir -p $mnt && mount -o loop $img $mnt || exit 1
# fusermount3 where installed; plain umount (root) elsewhere, such as the GPU machine.
unmount() { fusermount3 -u "$1" 2>/dev/null || umount "$1"; }
trap 'unmount $mnt/p 2>/dev/null; umount $mnt; rm -rf $work' EXIT
[ -f $work/tree.tar ] || tar -C /usr -cf $work/tree.tar include 2>/dev/null
echo "pw-format2-bench" > $work/pw
pid=
ticks() { [ -n "$pid" ] && [ -e /proc/$pid/stat ] && awk '{print $14+$15}' /proc/$pid/stat || echo 0; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
phase() { # cfg label mib cmd...
  local cfg=$1 label=$2 mib=$3; shift 3
  local c0 s0 c1 s1 out
  c0=$(ticks); s0=$(date +%s%N)
  out=$("$@" 2>&1 | tail -1)
  s1=$(date +%s%N); c1=$(ticks)
  awk -v cfg=$cfg -v l=$label -v mib=$mib -v t=$((c1 - c0)) -v hz=$HZ -v ns=$((s1 - s0)) -v out="$out" 'BEGIN{
    cpu = t / hz; secs = ns / 1e9; gb = mib * 1048576 / 1e9;
    if (mib > 0) printf "%-12s %-14s %8.0f MB/s  daemon_cpu_s=%6.2f  cpu_s_per_GB=%5.2f  | %s\n", cfg, l, gb * 1000 / secs, cpu, cpu / gb, out;
    else printf "%-12s %-14s %8.0f ms    daemon_cpu_s=%6.2f  | %s\n", cfg, l, secs * 1000, cpu, out }'
}
echo "== $(date -u +%FT%TZ) $(nproc) cpus, kernel $(uname -r), $($BIN --version 2>&1 | head -1), engine $ENGINE, W1=$W1 WP=$WP T=$T"
mkdir -p $mnt/plain && tar -C $mnt/plain -xf $work/tree.tar && sync
echo "plain        du_tree_KiB $(du -sk $mnt/plain | cut -f1) files $(find $mnt/plain -type f | wc -l)"; rm -rf $mnt/plain
for round in $(seq 1 $REPEAT); do
for cfg in $CONFIGS; do
  fmt=${cfg%%_*}; fmt=${fmt#v}; io=${cfg#*_}
  c=$mnt/c.$cfg p=$mnt/p; rm -rf $c; mkdir -p $c $p
  $BIN init --passfile $work/pw --scrypt-logn 10 --format $fmt ${CHUNK:+--chunk-size $CHUNK} $c >/dev/null || exit 1
  $BIN mount --passfile $work/pw --engine $ENGINE --backing-io $io --log $work/$cfg.log $c $p || exit 1
  # The daemon's pid from its own log ("gpucryptfs[PID] info: mounted on ..."): other gpucryptfs
  # processes may run on the machine.
  pid=$(sed -n "s/.*gpucryptfs\[\([0-9]*\)\] info: mounted on .*/\1/p" $work/$cfg.log | tail -1)
  phase $cfg write_1x${W1}M $W1 $IOB write $p 1 $W1; drop
  phase $cfg read_1x $W1 $IOB read $p 1; rm -f $p/iob.*; drop
  phase $cfg write_${T}x${WP}M $((T * WP)) $IOB write $p $T $WP; drop
  phase $cfg read_${T}x $((T * WP)) $IOB read $p $T; rm -f $p/iob.*; drop
  phase $cfg untar 0 tar -C $p -xf $work/tree.tar; sync
  echo "$cfg du_tree_KiB $(du -sk $c | cut -f1) files $(find $c -type f | wc -l)"
  drop
  phase $cfg stat_tree 0 bash -c "find $p/include -type f -print0 | xargs -0 stat -c %s >/dev/null"; drop
  phase $cfg read_tree 0 bash -c "find $p/include -type f -print0 | xargs -0 cat >/dev/null"
  phase $cfg rm_tree 0 rm -rf $p/include
  grep -m1 "backing I/O" $work/$cfg.log | sed "s|^|$cfg: |"
  unmount $p; sleep 1; pid=
done
done
