#!/bin/bash
# tree_prof.sh: where a scan of a tree of small files goes (compare.sh's "stat every file" and "read
# every file" rows), gpucryptfs (defaults) beside passthrough_hp, both over io_uring: times and
# daemon CPU of each pass, FUSE requests, context switches, and system-wide `perf` profiles (the
# program's side too). Reports into $OUT. Tree: the first entries of /usr/include that
# passthrough_hp can hold open, as compare_tree.sh cuts it.
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
PERF=${PERF:-$D/../perf/run.sh}
ulimit -n $(ulimit -Hn)
limit=$(ulimit -Hn); entries=$(find /usr/include | wc -l)
(cd /usr && find include | awk -v n=$((limit < entries + 3000 ? limit - 3000 : entries)) 'NR <= n' | tar --no-recursion -cf /dev/shm/tp.tar -T - 2>/dev/null)
echo "tree entries: $(tar -tf /dev/shm/tp.tar | wc -l), $(nproc) cpus" | tee $OUT/times.txt
echo 1 > /sys/module/fuse/parameters/enable_uring
R=/dev/shm/tp; drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
ticks() { awk '{print $14+$15}' /proc/$pid/stat; }
for fs in ${FSL:-pt gcfs}; do
  fusermount3 -u $R/m 2>/dev/null; rm -rf $R; mkdir -p $R/c $R/m; echo pw-123456789 > $R/pw
  if [ $fs = pt ]; then passthrough_hp --nopassthrough --nosplice -o io_uring $R/c $R/m; pid=$(pgrep -n -x passthrough_hp)
  else gpucryptfs init --passfile $R/pw --scrypt-logn 10 $R/c >/dev/null 2>&1
    gpucryptfs mount --passfile $R/pw ${EXTRA_ARGS:-} --log $R/log $R/c $R/m || exit 1; pid=$(pgrep -n -x gpucryptfs); fi
  dcomm=$( [ $fs = pt ] && echo passthrough_hp || echo gpucryptfs )
  tar -C $R/m -xf /dev/shm/tp.tar; drop
  for w in stat read; do
    if [ $w = stat ]; then cmd="find $R/m/include -type f -print0 | xargs -0 stat -c %s >/dev/null"
    else cmd="find $R/m/include -type f -print0 | xargs -0 cat >/dev/null"; fi
    for i in 1 2 3; do drop; t0=$(ticks); s=$(date +%s%N); bash -c "$cmd"
      echo "$fs $w pass $i: $(( ($(date +%s%N) - s) / 1000000 )) ms, daemon ticks $(( $(ticks) - t0 ))" | tee -a $OUT/times.txt; done
    drop
    $PERF stat -e context-switches,cpu-migrations,task-clock -p $pid -o $R/pstat 2>/dev/null & ps=$!; sleep 0.3
    bash -c "$cmd"; kill -INT $ps; wait $ps; grep -E "context|migr|task-clock" $R/pstat | sed "s/^/$fs $w: /" >> $OUT/times.txt
    drop
    $PERF record -a -g -F 2999 -o $R/$w.data 2>/dev/null & pp=$!; sleep 0.5
    bash -c "$cmd"; kill -INT $pp; wait $pp
    { echo "== $fs $w: by command"; $PERF report -i $R/$w.data --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
      echo "== $fs $w: the daemon, by symbol"; $PERF report -i $R/$w.data --no-children --comm $dcomm --sort dso,sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -45
      echo "== $fs $w: every command, by symbol"; $PERF report -i $R/$w.data --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -30; } >> $OUT/$fs.txt 
    if [ $fs = gcfs ]; then drop  # the daemon's own functions with what they call (DWARF unwinding: no frame pointers)
      $PERF record --call-graph dwarf,8192 -F 1999 -p $pid -o $R/$w.dw.data 2>/dev/null & pp=$!; sleep 0.5
      bash -c "$cmd"; kill -INT $pp; wait $pp
      { echo "== $fs $w: the daemon, inclusive"; $PERF report -i $R/$w.dw.data --children --sort sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | grep -v '\[k\]' | head -70; } >> $OUT/$fs.txt
    fi
  done
  fusermount3 -u $R/m; sleep 0.5
done
echo 0 > /sys/module/fuse/parameters/enable_uring; rm -rf $R /dev/shm/tp.tar
