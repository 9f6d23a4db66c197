#!/bin/bash
# The longer power-cut sweep (tests/powercut/README.md): the seeded drop-all workloads of the
# suite for seeds 1..SEEDS (a directory vault, and ext4 in a volume) and the same directory
# workloads with a seeded subset of the unsynced pieces landing, then once each the torn-write
# cases that ctest leaves out because they fail today (and any DISABLED_ finding), with a summary
# at the end. Exits non-zero when a seeded workload fails; the torn cases are reported, not
# counted, until issue 39's fix turns them on in the suite.
#
#   scripts/powercut_sweep.sh SEEDS      (as root; builds into $BUILD_DIR or build/ first)
set -euo pipefail
seeds=${1:-}
if [[ ! $seeds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 SEEDS (a number of seeds, 1 or more)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
BUILD_TARGETS="powercut_mount_test powercut_volume_test" "$root/scripts/build.sh" >/dev/null
export GPUCRYPTFS_TEST_TRANSPORT=${GPUCRYPTFS_TEST_TRANSPORT:-classic}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# run NAME TEST_BINARY GTEST_FILTER [ENV=VALUE...]: one gtest run, its log kept; prints PASS or FAIL.
run() {
  local name=$1 binary=$2 filter=$3
  shift 3
  if env "$@" "$build/tests/$binary" --gtest_filter="$filter" --gtest_also_run_disabled_tests \
      >"$logs/$name.log" 2>&1; then
    echo PASS
  else
    echo FAIL
  fi
}

failed_dir=() failed_vol=() failed_subset=()
for ((seed = 1; seed <= seeds; ++seed)); do
  [[ $(run "dir-$seed" powercut_mount_test 'PowercutMount.DropAll*' GCFS_POWERCUT_SEED=$seed) == PASS ]] ||
    failed_dir+=("$seed")
  [[ $(run "vol-$seed" powercut_volume_test 'PowercutVolume.*' GCFS_POWERCUT_SEED=$seed) == PASS ]] ||
    failed_vol+=("$seed")
  [[ $(run "subset-$seed" powercut_mount_test 'PowercutMount.SubsetOf*' GCFS_POWERCUT_SEED=$seed \
      GPUCRYPTFS_TEST_TORN=1) == PASS ]] || failed_subset+=("$seed")
  printf '\rseed %d of %d' "$seed" "$seeds"
done
echo

echo "== power-cut sweep, $seeds seeds =="
printf '%-58s %s\n' "drop all unsynced, directory vault (40 ops a seed)" \
  "$((seeds - ${#failed_dir[@]})) of $seeds passed${failed_dir[*]:+; failed seeds: ${failed_dir[*]}}"
printf '%-58s %s\n' "drop all unsynced, ext4 in a volume" \
  "$((seeds - ${#failed_vol[@]})) of $seeds passed${failed_vol[*]:+; failed seeds: ${failed_vol[*]}}"
printf '%-58s %s\n' "second cut during the journal's replay" \
  "$(run recovery powercut_mount_test 'PowercutRecovery.*')"
echo "-- cases that fail today (issue 39) --"
printf '%-58s %s\n' "a seeded subset of the unsynced pieces lands, directory vault" \
  "$((seeds - ${#failed_subset[@]})) of $seeds passed"
while read -r binary test; do
  result=$(run "$(echo "$test" | tr '/.' '__')" "$binary" "$test" GPUCRYPTFS_TEST_TORN=1)
  where=
  if [[ $result == FAIL ]]; then  # which cuts failed, and how (the first line of each)
    where=$(grep -oE '(cut at write [0-9]+ tear (none|all|prefix:[0-9]+|subset:[0-9]+)|reading [a-z.]+: [A-Za-z/ ]+|problem: [^:]{1,60})' \
      "$logs/$(echo "$test" | tr '/.' '__').log" | sort -u | head -4 | paste -sd ';' -)
  fi
  printf '%-58s %s %s\n' "${test#*/}" "$result" "$where"
done < <(
  for binary in powercut_mount_test powercut_volume_test; do
    "$build/tests/$binary" --gtest_list_tests --gtest_also_run_disabled_tests | awk -v b="$binary" '
      /^[^ ]/ { suite = $1 } /^  / { name = suite $1; if (name ~ /Torn|DISABLED_/) print b, name }'
  done
)
[[ ${#failed_dir[@]} -eq 0 && ${#failed_vol[@]} -eq 0 ]]
