#!/bin/bash
# Engines and binaries through the mount, interleaved (GPU machine): VARIANTS
# "engine:binary[:mount,args[:ENV=value]] ..." (default: cpu, auto of gpucryptfs.old, auto, gpu); 1 and 8 streams and random
# 128 KiB reads, MB/s (daemon CPU s/GB); RANDOM4K=1 adds random 4 KiB reads and writes with 8
# threads (MB/s, daemon CPU s); USE=1 prints the hybrid's engine use, SHAPES=1 runs
# gpu_engine_bench --shapes after. Runs from the folder that shared/bench/gather_tools.sh fills
# (iobench; gpucryptfs, gpucryptfs.old and gpu_engine_bench from scripts/build_for_device.sh):
# copy it there and carry that folder to the machine.
D=$(cd "$(dirname "$0")" && pwd); IOB=$D/iobench
root=/dev/shm/e7; rm -rf $root; mkdir -p $root; pw=$root/pw; echo pw-1 > $pw
echo 1 > /sys/module/fuse/parameters/enable_uring
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
HZ=$(getconf CLK_TCK)
for round in ${ROUNDS:-1 2}; do
 for v in ${VARIANTS:-cpu:gpucryptfs auto:gpucryptfs.old auto:gpucryptfs gpu:gpucryptfs}; do
  IFS=: read -r e b args envs <<< "$v"; G=$D/$b
  c=$root/c m=$root/m; rm -rf $c; mkdir -p $c $m
  $G init --passfile $pw --scrypt-logn 10 $c >/dev/null
  env $envs $G mount --passfile $pw --engine $e ${args//,/ } --log $root/log $c $m; pid=$(pgrep -n -f "$G mount")
  line="r$round $v"
  ph() { local n=$1 mib=$2; shift 2; local t0=$(awk '{print $14+$15}' /proc/$pid/stat); local r=$("$@" 2>&1 | grep -o 'MB/s=[0-9.]*' | tail -1); local t1=$(awk '{print $14+$15}' /proc/$pid/stat); line="$line $n ${r#MB/s=} ($(awk -v t=$((t1-t0)) -v hz=$HZ -v mib=$mib 'BEGIN{if(mib>0) printf "%.2f", t/hz/(mib*1.048576/1000); else printf "%.2fs", t/hz}'))"; }
  ph w1 1024 $IOB write $m 1 1024; drop; ph r1 1024 $IOB read $m 1; rm -f $m/iob.*; drop
  ph w8 2048 $IOB write $m 8 256; drop; ph r8 2048 $IOB read $m 8; drop
  ph rr128k 0 $IOB rand $m/iob.0 8 3 131072 rd
  if [ -n "$RANDOM4K" ]; then ph rr4k 0 $IOB rand $m/iob.0 8 3 4096 rd; ph rw4k 0 $IOB rand $m/iob.0 8 3 4096 wd; fi
  rm -f $m/iob.*
  echo "$line"
  umount $m; while kill -0 $pid 2>/dev/null; do sleep 0.05; done
  [ -n "$USE" ] && grep -o "engine use.*" $root/log | tail -1
 done
done
[ -n "$SHAPES" ] && $D/gpu_engine_bench --shapes --engines cpu,gpu,auto > /tmp/sh.txt 2>&1; grep -E "^csv,thr" /tmp/sh.txt | awk -F, '{print $2, $3, $4, $5, $7}'; grep "after" /tmp/sh.txt
