#!/bin/bash
# w8prof.sh: where the daemon's time goes on 8 streams written through the mount over io_uring
# (device experiment): per engine (ENGINES, default "auto cpu"), the daemon's symbols with their
# kernel callers, and its own functions inclusive (DWARF call graphs: an unstripped gpucryptfs
# gives names). Reports into $OUT.
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
PERF=${PERF:-$D/../perf/run.sh}
root=/dev/shm/wp; rm -rf $root; mkdir -p $root; pw=$root/pw; echo "compare-password-1" > $pw
echo 1 > /sys/module/fuse/parameters/enable_uring
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
for e in ${ENGINES:-auto cpu}; do
  c=$root/c m=$root/m; rm -rf $c; mkdir -p $c $m
  gpucryptfs init --passfile $pw --scrypt-logn 10 $c >/dev/null
  gpucryptfs mount --passfile $pw --engine $e $EXTRA --log $root/log.$e $c $m; pid=$(pgrep -n -x gpucryptfs)
  for i in 1 2; do t0=$(awk '{print $14+$15}' /proc/$pid/stat)
    echo "$e plain $i: $(iobench write $m 8 256 | tail -1) daemon ticks $(( $(awk '{print $14+$15}' /proc/$pid/stat) - t0 ))"; rm -f $m/iob.*; drop; done
  $PERF record -a -g -F 2999 -o $root/$e.data -- iobench write $m 8 256 2>&1 | grep MB/s; rm -f $m/iob.*; drop
  { echo "== $e: by command"; $PERF report -i $root/$e.data --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
    echo "== $e: the daemon's kernel symbols with callers"; $PERF report -i $root/$e.data --no-children --comm gpucryptfs --sort sym --stdio -g caller,0.5,callee,function,percent --percent-limit 1.5 2>/dev/null | grep -v '^$' | head -260
  } > $OUT/$e.sys.txt
  $PERF record --call-graph dwarf,16384 -F 999 -p $pid -o $root/$e.dw.data 2>/dev/null & pp=$!; sleep 0.5
  iobench write $m 8 256 | tail -1; kill -INT $pp; wait $pp; rm -f $m/iob.*
  { echo "== $e: the daemon, inclusive"; $PERF report -i $root/$e.dw.data --children --sort sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -120; } > $OUT/$e.dw.txt
  umount $m; while kill -0 $pid 2>/dev/null; do sleep 0.05; done
done
rm -rf $root
