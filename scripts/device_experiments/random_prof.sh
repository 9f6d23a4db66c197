#!/bin/bash
# random_prof.sh: perf of the daemon on random O_DIRECT reads (BS, default 4 KiB; TS threads, default
# "1 8"): gpucryptfs (--engine cpu) and passthrough_hp (FSL), over io_uring; reports into $OUT.
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
PERF=${PERF:-$D/../perf/run.sh}
R=/dev/shm/rp; echo 1 > /sys/module/fuse/parameters/enable_uring
for fs in ${FSL:-gcfs pt}; do
 fusermount3 -u $R/m 2>/dev/null; rm -rf $R; mkdir -p $R/c $R/m; echo pw > $R/pw
 if [ $fs = pt ]; then passthrough_hp --nopassthrough --nosplice -o io_uring $R/c $R/m; pid=$(pgrep -n -x passthrough_hp)
 else gpucryptfs init --passfile $R/pw --scrypt-logn 10 $R/c >/dev/null 2>&1
  gpucryptfs mount --passfile $R/pw --engine cpu --log $R/log $R/c $R/m || exit 1; pid=$(pgrep -n -f " mount .*$R/c"); fi
 iobench write $R/m 1 512 >/dev/null 2>&1
 for t in ${TS:-1 8}; do
  $PERF stat -e context-switches,cpu-migrations,task-clock,cycles,instructions -p $pid -o $OUT/$fs.t$t.stat & ps=$!; sleep 0.2
  iobench rand $R/m/iob.0 $t 2 ${BS:-4096} rd 2>&1 | tail -1 | sed "s/^/$fs /"
  kill -INT $ps; wait $ps
  $PERF record -F 2999 -g -p $pid -o $R/$fs.t$t.data 2>/dev/null & pp=$!; sleep 0.3
  iobench rand $R/m/iob.0 $t 2 ${BS:-4096} rd >/dev/null 2>&1
  kill -INT $pp; wait $pp
  $PERF report -i $R/$fs.t$t.data --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -70 > $OUT/$fs.t$t.flat.txt
  $PERF report -i $R/$fs.t$t.data --no-children --sort dso --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -12 > $OUT/$fs.t$t.dso.txt
  $PERF report -i $R/$fs.t$t.data --children --sort sym --stdio -g caller,0.5,callee,function,percent --percent-limit 3 2>/dev/null | grep -v '^$' | head -400 > $OUT/$fs.t$t.graph.txt
 done
 ls /proc/$pid/task | wc -l > $OUT/$fs.threads
 fusermount3 -u $R/m; sleep 0.5
done
rm -rf $R
