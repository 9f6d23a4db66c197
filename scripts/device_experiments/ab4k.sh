#!/bin/bash
# ab4k.sh: ABBA, cpu against auto on random 4 KiB reads and writes (8 threads) and the untar, io_uring
# (device experiment); one line per mount into $OUT/ab.txt.
D=$(cd "$(dirname "$0")" && pwd); G=$D/gpucryptfs; IOB=$D/iobench
root=/dev/shm/ab; rm -rf $root; mkdir -p $root; pw=$root/pw; echo pw-1 > $pw
echo 1 > /sys/module/fuse/parameters/enable_uring
[ -f /dev/shm/tree.tar ] || tar -C /usr -cf /dev/shm/tree.tar include 2>/dev/null
for e in cpu auto auto cpu cpu auto; do
  c=$root/c m=$root/m; rm -rf $c; mkdir -p $c $m
  $G init --passfile $pw --scrypt-logn 10 $c >/dev/null
  $G mount --passfile $pw --engine $e --log $root/log $c $m; pid=$(pgrep -n -x gpucryptfs)
  $IOB write $m 1 256 > /dev/null 2>&1
  rr=$($IOB rand $m/iob.0 8 3 4096 rd 2>&1 | grep -o 'MB/s=[0-9.]*')
  rw=$($IOB rand $m/iob.0 8 2 4096 wd 2>&1 | grep -o 'MB/s=[0-9.]*')
  s=$(date +%s%N); tar -C $m -xf /dev/shm/tree.tar; sync; ut=$(( ($(date +%s%N)-s)/1000000 ))
  echo "$e rr4k8 $rr rw4k8 $rw untar_ms=$ut" | tee -a $OUT/ab.txt
  umount $m; while kill -0 $pid 2>/dev/null; do sleep 0.05; done
done
