#!/bin/bash
# The peers table of docs/BENCHMARKS.md on the GPU machine: the shared compare.sh (W1=1024 WP=256
# T=8 RS=3) with the tree cut to what passthrough_hp can hold open under the descriptor limit (20000
# there); table.py's table of it; compare.log into $OUT. It runs from the folder that
# shared/bench/gather_tools.sh fills (compare.sh, table.py, iobench, the peers, a gpucryptfs from
# scripts/build_for_device.sh): copy it there and carry that folder to the machine.
D=$(cd "$(dirname "$0")" && pwd); cd $D
echo 1 > /sys/module/fuse/parameters/enable_uring
limit=$(ulimit -Hn); entries=$(find /usr/include | wc -l)
echo "fd hard limit $limit, /usr/include entries $entries"
if ((limit < entries + 3000)); then (cd /usr && find include | awk -v n=$((limit-3000)) 'NR <= n' | tar --no-recursion -cf /dev/shm/tree.tar -T - 2>/dev/null); fi
echo "tree entries: $(tar -tf /dev/shm/tree.tar 2>/dev/null | wc -l)"
ROOT=/dev/shm/cmp W1=1024 WP=256 T=8 RS=3 FSLIST="${FSLIST:-fuse fuse_uring gocryptfs securefs gcfs_auto+--transport,classic gcfs_auto gcfs_cpu}" timeout 470 ./compare.sh . > $OUT/compare.log
python3 table.py $OUT/compare.log gcfs_auto
