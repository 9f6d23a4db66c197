#!/bin/bash
# r8v.sh: 8-stream write and read through the mount (RAND=1: random 4 KiB rows too), variants
# interleaved (device experiment). VARIANTS: "name:transport[:ENV=..,ENV=..]", the variables set for
# the daemon; GCFS_BIN=path picks another binary (A/B against an older build). The GCFS_X_*
# switches of docs/BENCHMARKS.md's 2026-11-26 table were in experiment builds only. ENGINE
# (default gpu), ROUNDS (default 1 2 3).
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
root=/dev/shm/r8v; rm -rf $root; mkdir -p $root; pw=$root/pw; echo "compare-password-1" > $pw
echo 1 > /sys/module/fuse/parameters/enable_uring
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
for round in ${ROUNDS:-1 2 3}; do
 for v in $VARIANTS; do
  name=${v%%:*}; rest=${v#*:}; t=${rest%%:*}; envs=${rest#*:}; [ "$envs" = "$rest" ] && envs=
  c=$root/c m=$root/m; rm -rf $c; mkdir -p $c $m
  gpucryptfs init --passfile $pw --scrypt-logn 10 $c >/dev/null
  bin=gpucryptfs; case "$envs" in *GCFS_BIN=*) bin=$(echo $envs | tr ',' '\n' | grep GCFS_BIN= | cut -d= -f2);; esac
  env $(echo $envs | tr ',' ' ') $bin mount --passfile $pw --engine ${ENGINE:-gpu} --transport $t --log $root/log.$name $c $m; pid=$(pgrep -n -f "$bin mount")
  t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  w=$(iobench write $m 8 256 2>&1 | grep -o 'MB/s=[0-9.]*'); t1=$(awk '{print $14+$15}' /proc/$pid/stat); drop
  r=$(iobench read $m 8 2>&1 | grep -o 'MB/s=[0-9.]*'); t2=$(awk '{print $14+$15}' /proc/$pid/stat)
  x=; if [ -n "$RAND" ]; then x="rr4k $(iobench rand $m/iob.0 8 2 4096 rd 2>&1 | grep -o 'MB/s=[0-9.]*') rw4k $(iobench rand $m/iob.0 8 2 4096 wd 2>&1 | grep -o 'MB/s=[0-9.]*') rr4k1 $(iobench rand $m/iob.0 1 2 4096 rd 2>&1 | grep -o 'MB/s=[0-9.]*')"; fi
  echo "r$round $name write8 $w cpu=$((t1-t0)) read8 $r cpu=$((t2-t1)) $x"
  umount $m; while kill -0 $pid 2>/dev/null; do sleep 0.05; done
 done
done
