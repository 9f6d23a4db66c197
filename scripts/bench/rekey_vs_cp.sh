#!/bin/bash
# gpucryptfs rekey against `cp -a` of the same CIPHERDIR: two vaults on ROOT, one of one BIG_MIB
# file, one of FILES small files (1 to 7 KB, 1000 per directory); each round times a `cp -a` of
# the vault, then a `rekey` of a fresh copy (its summary line gives the read, cipher and write
# time). Prints one line per vault and round.
#
#   scripts/bench/rekey_vs_cp.sh GPUCRYPTFS        (needs root, for the mount that fills them)
#
# Knobs (environment): ROOT (default /dev/shm/rekey-bench), BIG_MIB (512), FILES (20000),
# ROUNDS (3), ENGINE (cpu).
set -euo pipefail
bin=$(realpath "$1")
root=${ROOT:-/dev/shm/rekey-bench} big=${BIG_MIB:-512} files=${FILES:-20000} rounds=${ROUNDS:-3}
engine=${ENGINE:-cpu}
rm -rf "$root" && mkdir -p "$root/one" "$root/many" "$root/m"
printf 'bench password\n' > "$root/pw" && chmod 600 "$root/pw"
fill() {  # vault, then the commands that fill its mount
  "$bin" init -q --scrypt-logn 10 --passfile "$root/pw" "$root/$1"
  "$bin" mount --engine "$engine" --passfile "$root/pw" --log "$root/log" "$root/$1" "$root/m"
  (cd "$root/m" && eval "$2")
  fusermount3 -u "$root/m"
}
fill one "head -c ${big}M /dev/urandom > f"
fill many "for ((d = 0; d * 1000 < files; d++)); do mkdir d\$d; for ((i = 0; i < 1000 && d * 1000 + i < files; i++)); do
  head -c \$((1000 + (i * 37) % 6000)) /dev/urandom > d\$d/f\$i; done; done"
now() { date +%s.%N; }
for ((r = 1; r <= rounds; r++)); do
  for v in one many; do
    rm -rf "$root/copy" "$root/rekeyed" && sync
    t0=$(now); cp -a "$root/$v" "$root/copy"; t1=$(now)
    cp -a "$root/$v" "$root/rekeyed" && rm -rf "$root/copy" && sync
    t2=$(now)
    "$bin" rekey -q --progress --engine "$engine" --passfile "$root/pw" "$root/rekeyed" </dev/null 2>"$root/err"
    t3=$(now)
    printf '%s round %d: cp -a %.2f s, rekey %.2f s (%.1fx); %s\n' "$v" "$r" "$(echo "$t1 - $t0" | bc)" \
      "$(echo "$t3 - $t2" | bc)" "$(echo "($t3 - $t2) / ($t1 - $t0)" | bc -l)" "$(grep -o 'read .* write [0-9.]* s' "$root/err" | tail -1)"
  done
done
rm -rf "$root"
