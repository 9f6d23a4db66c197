#!/bin/bash
# tree_ab.sh: two or more daemons (BINS, default "gpucryptfs.base gpucryptfs" beside this script)
# alternated ROUNDS times (default 3, order reversed every other round) on a tree of small files:
# untar, then "stat every file" and "read every file" as compare.sh times them (caches dropped
# before each pass), with the daemon's CPU ticks; passthrough_hp over io_uring too where PT=1.
# Defaults of each daemon (io_uring). Tree: the first entries of /usr/include that passthrough_hp
# can hold open. One line per pass on stdout.
D=$(cd "$(dirname "$0")" && pwd); export PATH=$D:$PATH LD_LIBRARY_PATH=$D/lib
ulimit -n $(ulimit -Hn)
limit=$(ulimit -Hn); entries=$(find /usr/include | wc -l)
(cd /usr && find include | awk -v n=$((limit < entries + 3000 ? limit - 3000 : entries)) 'NR <= n' | tar --no-recursion -cf /dev/shm/tab.tar -T - 2>/dev/null)
echo "tree entries: $(tar -tf /dev/shm/tab.tar | wc -l), $(nproc) cpus"
echo 1 > /sys/module/fuse/parameters/enable_uring
R=/dev/shm/tab; drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
ticks() { awk '{print $14+$15}' /proc/$pid/stat; }
BINS=${BINS:-"gpucryptfs.base gpucryptfs"}; [ "${PT:-0}" = 1 ] && BINS="$BINS pt"
for round in $(seq ${ROUNDS:-3}); do
  list=$BINS; ((round % 2 == 0)) && list=$(echo $BINS | tr ' ' '\n' | tac | tr '\n' ' ')
  for b in $list; do
    fusermount3 -u $R/m 2>/dev/null; rm -rf $R; mkdir -p $R/c $R/m; echo pw-123456789 > $R/pw
    if [ $b = pt ]; then passthrough_hp --nopassthrough --nosplice -o io_uring $R/c $R/m; pid=$(pgrep -n -x passthrough_hp)
    else $D/$b init --passfile $R/pw --scrypt-logn 10 $R/c >/dev/null 2>&1
      $D/$b mount --passfile $R/pw ${EXTRA_ARGS:-} --log $R/log $R/c $R/m || exit 1; pid=$(pgrep -n -f "$b mount .*$R/c"); fi
    t0=$(ticks); s=$(date +%s%N); tar -C $R/m -xf /dev/shm/tab.tar
    echo "round $round $b untar: $(( ($(date +%s%N) - s) / 1000000 )) ms, daemon ticks $(( $(ticks) - t0 ))"
    for w in stat stat read read; do
      if [ $w = stat ]; then cmd="find $R/m/include -type f -print0 | xargs -0 stat -c %s >/dev/null"
      else cmd="find $R/m/include -type f -print0 | xargs -0 cat >/dev/null"; fi
      drop; t0=$(ticks); s=$(date +%s%N); bash -c "$cmd"
      echo "round $round $b $w: $(( ($(date +%s%N) - s) / 1000000 )) ms, daemon ticks $(( $(ticks) - t0 ))"
    done
    fusermount3 -u $R/m; sleep 0.5
  done
done
echo 0 > /sys/module/fuse/parameters/enable_uring; rm -rf $R /dev/shm/tab.tar
