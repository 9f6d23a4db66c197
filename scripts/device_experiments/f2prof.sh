#!/bin/bash
# f2prof.sh: the daemon's CPU per GB through a format 2 vault on ext4 (a loop-mounted image in
# /dev/shm, O_DIRECT backing I/O, io_uring), 1 and 8 streams, per engine (ENGINES, default "gpu
# cpu"); perf profiles of the gpu engine's daemon per phase into $OUT (device experiment).
D=$(cd "$(dirname "$0")" && pwd); PERF=${PERF:-$D/../perf/run.sh}; G=$D/gpucryptfs; IOB=$D/iobench
HZ=$(getconf CLK_TCK); work=/dev/shm/f2; mkdir -p $work; img=$work/img; mnt=$work/ext4
truncate -s 12G $img && mkfs.ext4 -q -F $img && mkdir -p $mnt && mount -o loop $img $mnt || exit 1
echo pw-1 > $work/pw; echo 1 > /sys/module/fuse/parameters/enable_uring
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
for e in ${ENGINES:-gpu cpu}; do
  c=$mnt/c.$e p=$mnt/p; rm -rf $c; mkdir -p $c $p
  $G init --passfile $work/pw --scrypt-logn 10 $c > /dev/null
  $G mount --passfile $work/pw --engine $e --backing-io direct --log $work/$e.log $c $p || exit 1
  pid=$(pgrep -n -x gpucryptfs)
  for ph in write1 read1 write8 read8; do
    case $ph in write1) cmd="$IOB write $p 1 1024"; mib=1024;; read1) cmd="$IOB read $p 1"; mib=1024;;
      write8) cmd="$IOB write $p 8 256"; mib=2048;; read8) cmd="$IOB read $p 8"; mib=2048;; esac
    [ $e = gpu ] && { $PERF record -g -p $pid -o /tmp/$e.$ph.data 2>/dev/null & pp=$!; sleep 0.3; }
    c0=$(awk '{print $14+$15}' /proc/$pid/stat); u0=$(awk '{print $14}' /proc/$pid/stat); s0=$(date +%s%N)
    r=$($cmd 2>&1 | tail -1)
    s1=$(date +%s%N); c1=$(awk '{print $14+$15}' /proc/$pid/stat); u1=$(awk '{print $14}' /proc/$pid/stat)
    [ $e = gpu ] && { kill -INT $pp; wait $pp; }
    awk -v e=$e -v ph=$ph -v t=$((c1-c0)) -v u=$((u1-u0)) -v hz=$HZ -v ns=$((s1-s0)) -v mib=$mib 'BEGIN{gb=mib*1048576/1e9; printf "%s %s %.2f GB/s cpu_s_per_GB=%.3f (user %.3f)\n", e, ph, gb/(ns/1e9), t/hz/gb, u/hz/gb}'
    case $ph in read1|read8) rm -f $p/iob.*;; esac; drop
    if [ $e = gpu ]; then
      $PERF report -i /tmp/$e.$ph.data --no-children --sort sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -45 > $OUT/$e.$ph.sym.txt
      $PERF report -i /tmp/$e.$ph.data --no-children --sort comm,dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -15 > $OUT/$e.$ph.dso.txt
    fi
  done
  grep -m2 -E "backing I/O|engine" $work/$e.log
  umount $p; while kill -0 $pid 2>/dev/null; do sleep 0.05; done
done
umount $mnt; rm -rf $work
