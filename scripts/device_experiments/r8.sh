#!/bin/bash
# r8.sh: 8 streams read through the mount, io_uring against /dev/fuse, cpu engine: system-wide
# profiles and scheduler counts (device experiment).
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
PERF=${PERF:-$D/../perf/run.sh}
root=/dev/shm/r8; rm -rf $root; mkdir -p $root; pw=$root/pw; echo "compare-password-1" > $pw
echo 1 > /sys/module/fuse/parameters/enable_uring
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
for t in uring classic uring classic; do
  c=$root/c m=$root/m; rm -rf $c; mkdir -p $c $m
  gpucryptfs init --passfile $pw --scrypt-logn 10 $c >/dev/null
  gpucryptfs mount --passfile $pw --engine ${ENGINE:-cpu} --transport $t --log $root/log.$t $c $m; pid=$(pgrep -n -x gpucryptfs)
  iobench write $m 8 256 > /dev/null; drop
  t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  if [ ! -e $OUT/$t.flat.txt ]; then
    $PERF record -a -g -o $root/$t.data -- iobench read $m 8 2>&1 | tail -1
    $PERF report -i $root/$t.data --no-children --sort comm,dso,sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -60 > $OUT/$t.flat.txt
    $PERF report -i $root/$t.data --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -20 > $OUT/$t.comm.txt
  else
    $PERF stat -a -e context-switches,cpu-migrations,task-clock -- iobench read $m 8 2>&1 | grep -E 'MB/s|context|migrations|task-clock' | tr -s ' '
  fi
  echo "$t daemon cpu ticks $(( $(awk '{print $14+$15}' /proc/$pid/stat) - t0 ))"
  grep -o 'transport:.*' $root/log.$t | cut -c1-150
  umount $m; sleep 0.5
done
