#!/bin/bash
# gpu16.sh: --engine gpu against cpu through the mount (io_uring, defaults otherwise): the engine
# line the mount logs, small files (untar, read the tree) and random 4 KiB / 128 KiB I/O, streams,
# two rounds interleaved (device experiment).
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
root=/dev/shm/g16; rm -rf $root; mkdir -p $root; pw=$root/pw; echo "compare-password-1" > $pw
[ -f /dev/shm/tree.tar ] || tar -C /usr -cf /dev/shm/tree.tar include 2>/dev/null
echo 1 > /sys/module/fuse/parameters/enable_uring
T=8; pid=
ticks() { awk '{print $14+$15}' /proc/$pid/stat 2>/dev/null || echo 0; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
ph() { local n=$1; shift; local t0; t0=$(ticks); local r; r=$("$@" 2>&1 | tail -1); echo "$n $(echo $r | grep -o 'threads=[0-9]*\|bs=[0-9]*\|MB/s=[0-9.]*' | tr '\n' ' ') cpu=$(( $(ticks) - t0 ))"; }
tm() { local n=$1; shift; local t0 s; t0=$(ticks); s=$(date +%s%N); "$@"; echo "$n ms=$(( ($(date +%s%N) - s) / 1000000 )) cpu=$(( $(ticks) - t0 ))"; }
for round in 1 2; do
  for e in ${ENGINES:-cpu gpu}; do
    c=$root/c m=$root/m; rm -rf $c; mkdir -p $c $m
    gpucryptfs init --passfile $pw --scrypt-logn 10 $c >/dev/null
    gpucryptfs mount --passfile $pw --engine $e --log $root/log.$e $c $m; pid=$(pgrep -n -x gpucryptfs)
    [ $round = 1 ] && grep -o 'gpu engine.*' $root/log.$e | head -1
    tm "r$round $e untar" tar -C $m -xf /dev/shm/tree.tar; drop
    tm "r$round $e read_tree" sh -c "find $m/include -type f -print0 | xargs -0 cat > /dev/null"
    tm "r$round $e rm" rm -rf $m/include
    ph "r$round $e write1" iobench write $m 1 1024; drop; ph "r$round $e read1" iobench read $m 1; rm -f $m/iob.0; drop
    ph "r$round $e write8" iobench write $m $T 256; drop; ph "r$round $e read8" iobench read $m $T; drop
    ph "r$round $e rr128k" iobench rand $m/iob.0 $T 3 131072 rd
    ph "r$round $e rr4k" iobench rand $m/iob.0 $T 3 4096 rd
    ph "r$round $e rw4k" iobench rand $m/iob.0 $T 3 4096 wd
    ph "r$round $e rr4k_1t" iobench rand $m/iob.0 1 3 4096 rd
    rm -f $m/iob.*
    umount $m; while kill -0 $pid 2>/dev/null; do sleep 0.05; done
  done
done
