#!/bin/bash
# random_ab.sh: A/B of two daemons, gpucryptfs.base against gpucryptfs (ENGINE, default cpu; io_uring),
# alternated ROUNDS times (default 2): 8-stream write and read, random O_DIRECT reads and writes.
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
R=/dev/shm/ab; echo 1 > /sys/module/fuse/parameters/enable_uring
for round in $(seq ${ROUNDS:-2}); do
for v in base new; do
 B=$D/gpucryptfs.base; [ $v = new ] && B=$D/gpucryptfs
 fusermount3 -u $R/m 2>/dev/null; rm -rf $R; mkdir -p $R/c $R/m; echo pw > $R/pw
 $B init --passfile $R/pw --scrypt-logn 10 $R/c >/dev/null 2>&1
 $B mount --passfile $R/pw --engine ${ENGINE:-cpu} --log $R/log $R/c $R/m || exit 1
 pid=$(pgrep -n -f " mount .*$R/c"); line="$v r$round"
 st() { c0=$(awk '{print $14+$15}' /proc/$pid/stat); o=$("$@" 2>&1 | tail -1); c1=$(awk '{print $14+$15}' /proc/$pid/stat); }
 st iobench write $R/m 8 256; line="$line | w8 $(echo $o | grep -o 'MB/s=[0-9.]*') c=$((c1-c0))"; sync; echo 3 > /proc/sys/vm/drop_caches
 st iobench read $R/m 8; line="$line | r8 $(echo $o | grep -o 'MB/s=[0-9.]*') c=$((c1-c0))"
 for w in "1 4096 rd" "8 4096 rd" "8 4096 wd" "8 131072 rd" "16 4096 rd"; do
  set -- $w; st iobench rand $R/m/iob.0 $1 2 $2 $3
  line="$line | $3${1}t$(( $2/1024 ))k $(echo $o | grep -o 'IOPS=[0-9]*') c=$((c1-c0))"
 done
 echo "$line"
 fusermount3 -u $R/m; sleep 0.5
done; done
rm -rf $R
