#!/bin/bash
# What a re-key costs beside copying the same ciphertext: for each vault below, `cp -a` of its
# CIPHERDIR (or `cp --sparse=always` of its container) and then `gpucryptfs rekey` / `volume
# rekey` with each engine, timed in turn, RUNS times, in one run so that the ratios compare:
#   big:    a directory vault holding one file of BIG_MIB MiB (default 512);
#   small:  a directory vault holding SMALL files of 1-8 KiB in 100 folders (default 20000);
#   volume: a volume container with VOLUME_GIB GiB written (default 1) in a volume twice as large.
# The re-key's own summary (read, cipher and write busy time, engine) is printed after each row,
# so it shows what bounds it. A benchmark, never a pass/fail test.
#
#   scripts/bench/rekey_speed.sh BIN          (needs root: it mounts)
#
# Knobs (environment): ROOT (default /dev/shm/rekey-speed), ENGINES (default "cpu"; on a GPU
# machine "cpu gpu auto"; an entry may add rekey options after commas: "cpu,--jobs=1"), ROWS
# (default "big small volume"), BIG_MIB, SMALL, VOLUME_GIB, RUNS (2).
set -u
(($# == 1)) || { sed -n 2,17p "$0"; exit 2; }
[[ $(id -u) == 0 ]] || { echo "rekey_speed: needs root (it mounts)" >&2; exit 1; }
bin=$1 root=${ROOT:-/dev/shm/rekey-speed} engines=${ENGINES:-cpu} rows=${ROWS:-big small volume}
big_mib=${BIG_MIB:-512} small=${SMALL:-20000} volume_gib=${VOLUME_GIB:-1} runs=${RUNS:-2}
unmount() { fusermount3 -u "$1" 2> /dev/null || umount "$1"; }  # a machine may lack fusermount3
mountpoint -q "$root/mnt" 2> /dev/null && unmount "$root/mnt"
rm -rf "$root" && mkdir -p "$root/mnt" || exit 1
pass=$root/pass
echo "rekey speed password" > "$pass" && chmod 600 "$pass"
trap 'mountpoint -q "$root/mnt" && unmount "$root/mnt"; rm -rf "$root"' EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

make_dir_vault() {  # row -> $root/vault
  mkdir -p "$root/vault" && "$bin" init -q --scrypt-logn 12 --passfile "$pass" "$root/vault" > /dev/null || return 1
  "$bin" mount --engine cpu --passfile "$pass" "$root/vault" "$root/mnt" 2> /dev/null || return 1
  case $1 in
    big)  # random data, a 64 MiB block repeated (reading /dev/urandom would time the kernel's RNG)
      head -c $((64 << 20)) /dev/urandom > "$root/block"
      for ((i = 0; i < (big_mib + 63) / 64; i++)); do cat "$root/block"; done | head -c $((big_mib << 20)) > "$root/mnt/big.bin"
      rm -f "$root/block" ;;
    small) python3 - "$root/mnt" "$small" << 'EOF'
import os, sys
m, n = sys.argv[1], int(sys.argv[2])
for d in range(100):
    os.mkdir(f"{m}/d{d}")
blob = os.urandom(8192)
for i in range(n):
    with open(f"{m}/d{i % 100}/f{i}", "wb") as f:
        f.write(blob[: 1024 + (i * 997) % 7168])
EOF
    ;;
  esac
  unmount "$root/mnt"
}

make_volume() {  # -> $root/vol.gcv
  "$bin" volume create --scrypt-logn 12 --size $((volume_gib * 2))G --passfile "$pass" "$root/vol.gcv" > /dev/null || return 1
  "$bin" volume mount --engine cpu --passfile "$pass" "$root/vol.gcv" "$root/mnt" 2> /dev/null || return 1
  dd if=/dev/zero of="$root/mnt/volume.img" bs=16M count=$((volume_gib * 64)) conv=notrunc,fsync status=none
  unmount "$root/mnt"
}

for row in $rows; do
  rm -rf "$root/vault" "$root/vol.gcv" "$root/copy"
  if [[ $row == volume ]]; then make_volume; target=$root/vol.gcv; cmd="volume rekey"
  else make_dir_vault "$row"; target=$root/vault; cmd="rekey --progress"; fi
  du -sh --apparent-size "$target" | sed "s|^|$row: |"
  for ((r = 1; r <= runs; r++)); do
    sync; t=$(now)
    if [[ $row == volume ]]; then cp --sparse=always "$target" "$root/copy"; else cp -a "$target" "$root/copy"; fi
    sync; cp_s=$(elapsed "$t"); rm -rf "$root/copy"
    line="$row run $r: cp $(printf %.2f "$cp_s") s"
    for spec in $engines; do
      e=${spec%%,*} extra=
      [[ $spec == *,* ]] && extra=${spec#*,} && extra=${extra//,/ }
      sync; t=$(now)
      out=$("$bin" $cmd --engine "$e" $extra --passfile "$pass" "$target" 2>&1)
      rc=$?; s=$(elapsed "$t")
      line+=" | $spec $(printf %.2f "$s") s ($(ratio "$s" "$cp_s")x)"
      [[ $rc == 0 ]] || line+=" FAILED rc=$rc"
      summary=$(tr '\r' '\n' <<< "$out" | grep -m1 -E "time busy|re-keyed .* in .* s" | sed 's/.*(\([^()]*\)); time busy/time busy/; s/^gpucryptfs rekey: //')
      echo "    $spec: $summary"
    done
    echo "$line"
  done
done
