#!/bin/bash
# eng.sh: engines through the mount (io_uring, defaults otherwise), interleaved rounds, perf stat
# of the daemon on rm and read_tree. ENGINES: specs "cpu", "gpu", "auto", or "auto@MODE", which sets
# GCFS_AUTO_MODE=MODE for the daemon (a switch only the experiment builds of 2026-11-26 had; see
# docs/BENCHMARKS.md).
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
PERF=${PERF:-$D/../perf/run.sh}
root=/dev/shm/eng; rm -rf $root; mkdir -p $root; pw=$root/pw; echo "compare-password-1" > $pw
[ -f /dev/shm/tree.tar ] || tar -C /usr -cf /dev/shm/tree.tar include 2>/dev/null
echo 1 > /sys/module/fuse/parameters/enable_uring
T=8; pid=
ticks() { awk '{print $14+$15}' /proc/$pid/stat 2>/dev/null || echo 0; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
ph() { local n=$1; shift; local t0; t0=$(ticks); local r; r=$("$@" 2>&1 | tail -1); echo "$n $(echo $r | grep -o 'MB/s=[0-9.]*' | tr '\n' ' ') cpu=$(( $(ticks) - t0 ))"; }
tm() { local n=$1; shift; local t0 s; t0=$(ticks); s=$(date +%s%N); "$@"; echo "$n ms=$(( ($(date +%s%N) - s) / 1000000 )) cpu=$(( $(ticks) - t0 ))"; }
pst() { local n=$1; shift; $PERF stat -p $pid -e task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions -o $OUT/stat.$n.txt 2>/dev/null & local pp=$!; sleep 0.3; tm "$n" "$@"; kill -INT $pp; wait $pp; }
for round in ${ROUNDS:-1 2}; do
  for spec in ${ENGINES:-cpu auto}; do
    e=${spec%%@*}; mode=; [ "$spec" != "$e" ] && mode=${spec#*@}
    c=$root/c m=$root/m; rm -rf $c; mkdir -p $c $m
    gpucryptfs init --passfile $pw --scrypt-logn 10 $c >/dev/null
    GCFS_AUTO_MODE=$mode gpucryptfs mount --passfile $pw --engine $e --log $root/log.$spec $c $m; pid=$(pgrep -n -x gpucryptfs)
    [ $round = 1 ] && { grep -o -E '(auto|gpu engine|cpu engine).*' $root/log.$spec | head -1; echo "threads: $(ls /proc/$pid/task | wc -l)"; }
    tm "r$round $spec untar" tar -C $m -xf /dev/shm/tree.tar; drop
    pst "r$round.$spec.read_tree" sh -c "find $m/include -type f -print0 | xargs -0 cat > /dev/null"
    pst "r$round.$spec.rm" rm -rf $m/include
    [ $round = 1 ] && for t in /proc/$pid/task/*; do echo "$(cat $t/comm) $(awk '{print $14+$15}' $t/stat)"; done | awk '$2>0' | sort | uniq -c | head -20
    ph "r$round $spec write1" iobench write $m 1 1024; drop; ph "r$round $spec read1" iobench read $m 1; rm -f $m/iob.0; drop
    ph "r$round $spec write8" iobench write $m $T 256; drop; ph "r$round $spec read8" iobench read $m $T; drop
    ph "r$round $spec rr128k" iobench rand $m/iob.0 $T 3 131072 rd
    ph "r$round $spec rr4k" iobench rand $m/iob.0 $T 3 4096 rd
    ph "r$round $spec rw4k" iobench rand $m/iob.0 $T 3 4096 wd
    rm -f $m/iob.*
    true
    umount $m; while kill -0 $pid 2>/dev/null; do sleep 0.05; done; grep -o "engine use.*" $root/log.$spec
  done
done
