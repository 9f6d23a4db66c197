#!/bin/bash
# w8.sh: 8 streams written through the mount (auto engine), io_uring against /dev/fuse: system-wide
# profiles, the machine's busy share, context switches, and the daemon's CPU per serving CPU
# (device experiment; PASSES="uring classic ..." picks the order).
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
PERF=${PERF:-$D/../perf/run.sh}
root=/dev/shm/w8; rm -rf $root; mkdir -p $root; pw=$root/pw; echo "compare-password-1" > $pw
echo 1 > /sys/module/fuse/parameters/enable_uring
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }  # busy ticks, idle+iowait ticks
# CPU ticks per daemon thread and the CPUs it may run on
threads() { local k f; for k in /proc/$1/task/*; do read -r -a f < $k/stat 2>/dev/null; echo "${k##*/} $(( ${f[13]} + ${f[14]} )) $(awk '/Cpus_allowed_list/{print $2}' $k/status)"; done; }
n=0
for t in ${PASSES:-uring classic uring classic}; do
  n=$((n + 1)); c=$root/c m=$root/m; rm -rf $c; mkdir -p $c $m
  gpucryptfs init --passfile $pw --scrypt-logn 10 $c >/dev/null
  gpucryptfs mount --passfile $pw --engine ${ENGINE:-auto} --transport $t $EXTRA --log $root/log.$t $c $m; pid=$(pgrep -n -x gpucryptfs)
  sleep 0.3; threads $pid > $root/th0; read -r b0 i0 < <(busy); t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  if [ $n -le 2 ] && [ -z "$NOPERF" ]; then
    $PERF record -a -g -o $root/$t.data -- iobench write $m 8 256 2>&1 | tail -1
  else
    $PERF stat -a -e context-switches,cpu-migrations,task-clock -- iobench write $m 8 256 2>&1 | grep -E 'MB/s|context|migrations|task-clock' | tr -s ' '
  fi
  read -r b1 i1 < <(busy); threads $pid > $root/th1
  echo "$t pass $n: daemon ticks $(( $(awk '{print $14+$15}' /proc/$pid/stat) - t0 )), machine busy $(( 100 * (b1 - b0) / (b1 - b0 + i1 - i0) ))%"
  # daemon ticks by the CPU list a thread was pinned to (unpinned threads: the whole list)
  join <(sort $root/th0) <(sort $root/th1) | awk '{d=$4-$2; if (d>0) s[$5]+=d} END {for (k in s) printf "  cpus %s: %d ticks\n", k, s[k]}' | sort -t: -k2 -rn | head -12
  if [ -e $root/$t.data ] && [ ! -e $OUT/$t.flat.txt ]; then
    $PERF report -i $root/$t.data --no-children --sort comm,dso,sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -70 > $OUT/$t.flat.txt
    $PERF report -i $root/$t.data --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -20 > $OUT/$t.comm.txt
    $PERF report -i $root/$t.data --no-children --sort cpu --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -20 > $OUT/$t.cpu.txt
    rm -f $root/$t.data
  fi
  grep -o 'transport:.*' $root/log.$t | cut -c1-120
  rm -f $m/iob.*; umount $m; while kill -0 $pid 2>/dev/null; do sleep 0.05; done
done
if [ -n "$SECUREFS" ]; then
  c=$root/s.c m=$root/s.m; mkdir -p $c $m
  securefs create --pass pw1 $c >/dev/null 2>&1; securefs mount -b --pass pw1 $c $m >/dev/null 2>&1; sleep 1
  read -r b0 i0 < <(busy)
  $PERF stat -a -e context-switches,task-clock -- iobench write $m 8 256 2>&1 | grep -E 'MB/s|context|task-clock' | tr -s ' '
  read -r b1 i1 < <(busy); echo "securefs: machine busy $(( 100 * (b1 - b0) / (b1 - b0 + i1 - i0) ))%"
  umount $m
fi
rm -rf $root
