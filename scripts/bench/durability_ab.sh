#!/bin/bash
# What the durability of names, new directories and truncations costs, for several gpucryptfs
# binaries side by side: each round makes a fresh vault per binary, in turn, and times through
# its mount
#   rewrite:       N times open(O_TRUNC) of a 16 KiB file, write 16 KiB, close (an editor's save, cp
#                  over a file: the truncation to 0 of a file with durable bytes is synced first);
#   rewrite_fsync: the same with an fsync before each close (a careful save);
#   long_names:    N new files of 1 KiB with 210-byte names (a .name file each, fsynced);
#   short_names:   N new files of 1 KiB with short names (unchanged: the reference);
#   mkdirs:        N new directories (each IV file and the directory itself fsynced).
# Prints per round and binary: wall ms per phase and microseconds per operation.
#
#   scripts/bench/durability_ab.sh BIN [BIN...]       (needs root)
#
# Knobs (environment): N (default 2000), ROUNDS (default 3), ROOT (default /dev/shm/durability:
# tmpfs, where an fsync costs little; a folder on a disk shows what the disk's flushes cost),
# TRANSPORT (classic, the default, or uring where it is turned on), MOUNT_ARGS (more mount options).
# A benchmark, never a pass/fail test: compare within one run, and repeat before believing a small
# difference.
set -u
(($# >= 1)) || { sed -n 2,20p "$0"; exit 2; }
[[ $(id -u) == 0 ]] || { echo "durability_ab: needs root (it mounts)" >&2; exit 1; }
n=${N:-2000} rounds=${ROUNDS:-3} root=${ROOT:-/dev/shm/durability} transport=${TRANSPORT:-classic}

# The timed loops, in one process per phase: python's per-call cost is small beside a FUSE round trip.
phase() {  # mountpoint phase
  python3 - "$1" "$2" "$n" <<'EOF'
import os, sys, time
m, phase, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
block = os.urandom(16384)
f = os.path.join(m, "rewritten")
if phase.startswith("rewrite"):
    fd = os.open(f, os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, block); os.fsync(fd); os.close(fd)
os.makedirs(os.path.join(m, phase), exist_ok=True)
t0 = time.perf_counter()
for i in range(n):
    if phase.startswith("rewrite"):
        fd = os.open(f, os.O_WRONLY | os.O_TRUNC)
        os.write(fd, block)
        if phase == "rewrite_fsync": os.fsync(fd)
        os.close(fd)
    elif phase == "mkdirs":
        os.mkdir(os.path.join(m, phase, "d%d" % i))
    else:
        name = ("f%d-" % i) + ("L" * 200 if phase == "long_names" else "")
        fd = os.open(os.path.join(m, phase, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, block[:1024]); os.close(fd)
dt = time.perf_counter() - t0
print("%s ms=%d us_per_op=%.0f" % (phase, dt * 1000, dt * 1e6 / n))
EOF
}

echo "== $(date -u +%FT%TZ) $(nproc) cpus, kernel $(uname -r), N=$n, backing $(df -T "$(dirname "$root")" | awk 'NR==2 {print $2}') ($root), transport $transport"
for round in $(seq 1 "$rounds"); do
  for b in $(seq 1 $#); do
    bin=${!b}
    rm -rf "$root"; mkdir -p "$root/c" "$root/m"; echo "durability-password" > "$root/pw"; chmod 600 "$root/pw"
    "$bin" init --passfile "$root/pw" --scrypt-logn 10 "$root/c" > /dev/null || exit 1
    # shellcheck disable=SC2086
    "$bin" mount --passfile "$root/pw" --transport "$transport" --log "$root/log" ${MOUNT_ARGS:-} "$root/c" "$root/m" || exit 1
    line="round $round bin $b"
    for p in rewrite rewrite_fsync long_names short_names mkdirs; do line+=" | $(phase "$root/m" "$p")"; done
    echo "$line"
    fusermount3 -u "$root/m"
    for _ in $(seq 1 50); do grep -q " $root/m " /proc/mounts || break; sleep 0.1; done
  done
done
rm -rf "$root"
