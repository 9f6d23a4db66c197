#!/usr/bin/env bash
# Builds what scripts/gpu_device_run.sh needs, statically (libfuse3, Boost, OpenSSL, the CUDA
# runtime), into build-device/ (ignored by git), and collects the binaries in build-device/carry,
# the one folder to name in the device run's `carry` (or build-device/pack, the same compressed,
# where the folder is too large to send). The device machine has the NVIDIA driver
# but no libfuse3 or Boost, hence the static link; this checks that nothing else is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-device
cmake -S . -B "$build" -DGPUCRYPTFS_STATIC=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
# The mounted-vault integration suites and the volume suite too: the device run drives them with
# --engine gpu.
integration="integration_fs_ops_test integration_programs_test integration_random_ops_test integration_tamper_test
             integration_cli_test integration_concurrency_test integration_fd_cache_test integration_file_size_test
             integration_local_users_test integration_transport_test volume_mount_test integration_rekey_test"
# The hybrid engine's tests, repeated there on many cores (CPU-only tests otherwise stay home: what
# travels is limited to 64 MiB with the working tree).
cpu_tests="crypto_hybrid_engine_test"
cmake --build "$build" -j"${JOBS:-2}" --target gpu_math_test gpu_engine_test gpu_buffers_test gpu_engine_bench gpucryptfs \
  deny_io_uring $integration $cpu_tests
rm -rf "$build/carry"
mkdir -p "$build/carry"
cp "$build/tests/gpu_math_test" "$build/tests/gpu_engine_test" "$build/tests/gpu_buffers_test" "$build/tests/gpu_engine_bench" \
   "$build/mount/gpucryptfs" "$build/tests/deny_io_uring" "$build/carry/"
for t in $integration $cpu_tests; do cp "$build/tests/$t" "$build/carry/"; done
# All symbols go, not only debug information: the carry must stay well under the 64 MiB that may
# travel with the working tree.
strip --strip-all "$build"/carry/* 2>/dev/null || true
# The suites are only linked against GoogleTest and the C++ runtime (they run the gpucryptfs
# binary); whatever shared libraries they need beyond libc travel in carry/lib (the device run
# sets LD_LIBRARY_PATH for them).
mkdir -p "$build/carry/lib"
for t in $integration $cpu_tests; do
  ldd "$build/carry/$t" | awk '/=> \// { print $3 }' |
    { grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' || true; } |
    while read -r lib; do cp -L -n "$lib" "$build/carry/lib/"; done
done
for f in "$build"/carry/*; do
  [ -f "$f" ] || continue
  case "$(basename "$f")" in integration_* | volume_mount_test | crypto_hybrid_engine_test) continue ;; esac
  extra=$(ldd "$f" | grep -v -E 'linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so' || true)
  if [ -n "$extra" ]; then
    echo "warning: $f needs more than libc at run time:" >&2
    echo "$extra" >&2
  fi
done
# What was built, for the device run's log: the device's copy of the repository may name another
# commit than the one these binaries come from.
{
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' with uncommitted changes')"
  echo "built $(date -u +%FT%TZ)"
} > "$build/carry/BUILD_INFO"
du -sh "$build/carry"
carry_mib=$(du -sm "$build/carry" | cut -f1)
tree_mib=$(git ls-files -z | du -cm --files0-from=- 2>/dev/null | tail -1 | cut -f1)
# The static intel-ipsec-mb adds about 13 MiB to each binary that links the cpu engine, so the
# folder no longer fits beside the working tree in what a device call may send (64 MiB). A
# compressed copy does: carry build-device/pack instead, and gpu_device_run.sh unpacks it.
rm -rf "$build/pack"
mkdir -p "$build/pack"
tar -C "$build" -czf "$build/pack/carry.tgz" carry
pack_mib=$(du -sm "$build/pack" | cut -f1)
echo "carry build-device/carry ($carry_mib MiB) or, packed, build-device/pack ($pack_mib MiB)"
if ((pack_mib + tree_mib > 60)); then
  echo "warning: even packed, the carry ($pack_mib MiB) and the working tree ($tree_mib MiB) come near the 64 MiB a device call may send" >&2
fi
