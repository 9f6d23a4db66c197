#!/bin/bash
# small.sh: idle daemon CPU per engine, then untar / read tree / rm alternating cpu and auto (ABBA).
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
root=/dev/shm/sm; rm -rf $root; mkdir -p $root; pw=$root/pw; echo "compare-password-1" > $pw
[ -f /dev/shm/tree.tar ] || tar -C /usr -cf /dev/shm/tree.tar include 2>/dev/null
echo 1 > /sys/module/fuse/parameters/enable_uring
ticks() { awk '{print $14+$15}' /proc/$pid/stat 2>/dev/null || echo 0; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
tm() { local n=$1; shift; local t0 s; t0=$(ticks); s=$(date +%s%N); "$@"; echo -n "$n ms=$(( ($(date +%s%N) - s) / 1000000 )) cpu=$(( $(ticks) - t0 ))  "; }
mnt() { c=$root/c m=$root/m; rm -rf $c; mkdir -p $c $m; gpucryptfs init --passfile $pw --scrypt-logn 10 $c >/dev/null
  gpucryptfs mount --passfile $pw --engine $1 --log $root/log.$1 $c $m; pid=$(pgrep -n -x gpucryptfs); }
for e in cpu auto gpu; do
  mnt $e; sleep 1; t0=$(ticks); sleep 5; echo "idle $e: $(( $(ticks) - t0 )) ticks in 5 s; busiest threads:"
  for t in /proc/$pid/task/*; do echo "  $(cat $t/comm) $(awk '{print $14+$15}' $t/stat)"; done | sort -k2 -n -r | head -4
  umount $m; while kill -0 $pid 2>/dev/null; do sleep 0.05; done
done
for e in cpu auto auto cpu cpu auto auto cpu; do
  mnt $e; echo -n "$e: "; tm untar tar -C $m -xf /dev/shm/tree.tar; drop
  tm tree sh -c "find $m/include -type f -print0 | xargs -0 cat > /dev/null"; tm rm rm -rf $m/include; echo
  umount $m; while kill -0 $pid 2>/dev/null; do sleep 0.05; done
done
