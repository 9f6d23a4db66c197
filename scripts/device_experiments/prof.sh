#!/bin/bash
# prof.sh: perf profiles of the daemon on small files (untar, read the tree), cpu against gpu engine,
# io_uring; writes reports into $OUT (device experiment).
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
PERF=${PERF:-$D/../perf/run.sh}
root=/dev/shm/pr; rm -rf $root; mkdir -p $root; pw=$root/pw; echo "compare-password-1" > $pw
[ -f /dev/shm/tree.tar ] || tar -C /usr -cf /dev/shm/tree.tar include 2>/dev/null
echo 1 > /sys/module/fuse/parameters/enable_uring
for e in ${ENGINES:-cpu gpu}; do
  c=$root/c m=$root/m; rm -rf $c; mkdir -p $c $m
  gpucryptfs init --passfile $pw --scrypt-logn 10 $c >/dev/null
  gpucryptfs mount --passfile $pw --engine $e --log $root/log.$e $c $m; pid=$(pgrep -n -x gpucryptfs)
  for step in untar read rm; do
    t0=$(awk '{print $14+$15}' /proc/$pid/stat); s=$(date +%s%N)
    $PERF record -g -p $pid -o $root/$e.$step.data 2>/dev/null & pp=$!
    sleep 0.3
    if [ $step = untar ]; then tar -C $m -xf /dev/shm/tree.tar; sync; echo 3 > /proc/sys/vm/drop_caches
    elif [ $step = read ]; then find $m/include -type f -print0 | xargs -0 cat > /dev/null
    else rm -rf $m/include; fi
    kill -INT $pp; wait $pp
    echo "$e $step ms=$(( ($(date +%s%N) - s) / 1000000 )) cpu_ticks=$(( $(awk '{print $14+$15}' /proc/$pid/stat) - t0 ))" | tee -a $OUT/prof.txt
    $PERF report -i $root/$e.$step.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v '^$' | grep -E '^ +[0-9]' | head -60 > $OUT/$e.$step.flat.txt
    $PERF report -i $root/$e.$step.data --no-children --sort comm,dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -20 > $OUT/$e.$step.dso.txt
    $PERF report -i $root/$e.$step.data --no-children --sort tid --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -12 > $OUT/$e.$step.tid.txt
  done
  s=$(date +%s%N); umount $m
  while kill -0 $pid 2>/dev/null; do sleep 0.02; done
  echo "$e teardown: daemon gone $(( ($(date +%s%N) - s) / 1000000 )) ms after umount; $(grep -o 'teardown after.*' $root/log.$e)" | tee -a $OUT/prof.txt
done
