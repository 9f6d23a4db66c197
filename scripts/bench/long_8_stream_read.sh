#!/bin/bash
# The 8-stream read with 8 x 1 GiB (compare.sh reads 8 x 256 MiB, about 0.3 s on the H100 machine,
# too short a sample): gocryptfs, gpucryptfs (defaults) and passthrough_hp over io_uring, alternated
# three times. Runs from the folder that shared/bench/gather_tools.sh fills: copy it there.
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
R=/dev/shm/r8l; echo 1 > /sys/module/fuse/parameters/enable_uring
for round in 1 2 3; do
for fs in gocryptfs gcfs fuse_uring; do
 fusermount3 -u $R/m 2>/dev/null; rm -rf $R; mkdir -p $R/c $R/m; echo pw > $R/pw
 case $fs in
  gocryptfs) gocryptfs -q -init -passfile $R/pw -scryptn 10 $R/c >/dev/null 2>&1; gocryptfs -q -passfile $R/pw $R/c $R/m; pid=$(pgrep -n -x gocryptfs) ;;
  gcfs) gpucryptfs init --passfile $R/pw --scrypt-logn 10 $R/c >/dev/null 2>&1; gpucryptfs mount --passfile $R/pw --log $R/log $R/c $R/m; pid=$(pgrep -n -f " mount .*$R/c") ;;
  fuse_uring) passthrough_hp --nopassthrough --nosplice -o io_uring $R/c $R/m; pid=$(pgrep -n -x passthrough_hp) ;;
 esac
 iobench write $R/m 8 1024 >/dev/null 2>&1; sync; echo 3 > /proc/sys/vm/drop_caches
 c0=$(awk '{print $14+$15}' /proc/$pid/stat)
 o=$(iobench read $R/m 8 2>&1 | tail -1)
 echo "$fs r$round $(echo $o | grep -o 's=[0-9.]* MB/s=[0-9.]*') cpu_ticks=$(( $(awk '{print $14+$15}' /proc/$pid/stat) - c0 ))"
 fusermount3 -u $R/m; sleep 0.5
done; done
rm -rf $R
