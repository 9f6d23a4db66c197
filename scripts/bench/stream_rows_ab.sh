#!/bin/bash
# stream_rows_ab.sh IOBENCH ROUNDS LABEL:WHAT... : the stream rows of the shared bench/compare.sh
# (write 1 x W1 MiB, read it back, write T x WP MiB, read them back; every byte checked on read) on
# several mounts side by side, interleaved: each round mounts every LABEL:WHAT afresh in turn, the
# order reversed every other round (the position in a round matters on a shared machine). WHAT is a
# gpucryptfs binary (mounted with its defaults, or EXTRA's arguments), `gocryptfs` or `securefs`.
# One line per mount and row: MB/s, the daemon's CPU seconds (user + system), the benchmark's own
# CPU seconds and the whole machine's busy CPU seconds; then the median of every mount and row.
#   W1 (default 512), WP (default 256), T (default 4): as compare.sh on the development VM.
#   ROOT (default /dev/shm/gcfs-streams: tmpfs, as compare.sh), EXTRA (gpucryptfs mount arguments).
# Example, main's binary against a branch's beside the peers:
#   cc -O2 -pthread -o /tmp/iobench ../shared/bench/iobench.c
#   scripts/bench/stream_rows_ab.sh /tmp/iobench 4 main:/tmp/gpucryptfs.main branch:build/mount/gpucryptfs \
#     gocryptfs:gocryptfs securefs:securefs
# Needs root (drops caches). A benchmark, not a test: numbers move 10-30% between runs here.
set -u
IOB=$(readlink -f "$1") N=$2
shift 2
W1=${W1:-512} WP=${WP:-256} T=${T:-4} ROOT=${ROOT:-/dev/shm/gcfs-streams}
HZ=$(getconf CLK_TCK)
log=$(mktemp /tmp/gcfs-streams.XXXXXX.log)
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
secs() { awk -v t="$1" -v h="$HZ" 'BEGIN{printf "%.2f", t/h}'; }
row() {  # label pid row command...
  local l=$1 pid=$2 name=$3
  shift 3
  local d0 b0 d1 b1 out
  d0=$(awk '{print $14+$15}' /proc/$pid/stat) b0=$(busy)
  out=$({ /usr/bin/time -f "TIME %U %S" "$@"; } 2>&1)
  d1=$(awk '{print $14+$15}' /proc/$pid/stat) b1=$(busy)
  echo "$l $name MB/s=$(echo "$out" | grep -o 'MB/s=[0-9.]*' | cut -d= -f2) daemon_s=$(secs $((d1 - d0)))" \
    "bench_s=$(echo "$out" | awk '/^TIME/{print $2+$3}') busy_s=$(secs $((b1 - b0))) load=$(cut -d' ' -f1 /proc/loadavg)"
}
one() {  # label:what
  local l=${1%%:*} what=${1#*:} r=$ROOT/${1%%:*} pid
  rm -rf "$r"
  mkdir -p "$r/c" "$r/m"
  echo "streams-password-1" > "$r/pw"
  case $what in
    gocryptfs) gocryptfs -q -init -passfile "$r/pw" -scryptn 10 "$r/c" >/dev/null 2>&1
      gocryptfs -q -passfile "$r/pw" "$r/c" "$r/m" ;;
    securefs) securefs create --pass "$(cat "$r/pw")" "$r/c" >/dev/null 2>&1
      securefs mount -b --pass "$(cat "$r/pw")" "$r/c" "$r/m" >/dev/null 2>&1
      sleep 1 ;;
    *) "$what" init --passfile "$r/pw" --scrypt-logn 10 "$r/c" >/dev/null
      "$what" mount --passfile "$r/pw" ${EXTRA:-} --log "$r/log" "$r/c" "$r/m" ;;
  esac
  mountpoint -q "$r/m" || { echo "$l: mount failed"; return; }
  pid=$(pgrep -n -f -- "$r/m")
  row "$l" "$pid" write_1x${W1}M "$IOB" write "$r/m" 1 "$W1"; drop
  row "$l" "$pid" read_1x "$IOB" read "$r/m" 1; rm -f "$r/m"/iob.*; drop
  row "$l" "$pid" write_${T}x${WP}M "$IOB" write "$r/m" "$T" "$WP"; drop
  row "$l" "$pid" read_${T}x "$IOB" read "$r/m" "$T"; rm -f "$r/m"/iob.*; drop
  fusermount3 -u "$r/m" 2>/dev/null || umount "$r/m"
  rm -rf "$r"
  sleep 1
}
for i in $(seq 1 "$N"); do
  specs=("$@")
  if ((i % 2 == 0)); then specs=(); for ((k = $#; k >= 1; k--)); do specs+=("${!k}"); done; fi
  for s in "${specs[@]}"; do one "$s" 2>/dev/null | tee -a "$log"; done
done
rmdir "$ROOT" 2>/dev/null
python3 - "$log" <<'PY'
import collections, re, statistics, sys
mbs, cpu = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r'(\S+) (\S+) MB/s=([\d.]+) daemon_s=([\d.]+)', line)
    if m:
        mbs[(m[2], m[1])].append(float(m[3]))
        cpu[(m[2], m[1])].append(float(m[4]))
print('medians:')
for k in sorted(mbs):
    print('%-16s %-10s MB/s %6.0f  daemon CPU s %.2f  (rounds: %s)' % (k[0], k[1], statistics.median(mbs[k]),
          statistics.median(cpu[k]), ' '.join('%.0f' % x for x in mbs[k])))
PY
echo "log: $log"
