#!/usr/bin/env bash
# Builds what scripts/gpu_device_run.sh needs, statically (libfuse3, Boost, OpenSSL, the CUDA
# runtime), into build-device/ (ignored by git), and collects the binaries in build-device/carry,
# the one folder to name in the device run's `carry`. The device machine has the NVIDIA driver
# but no libfuse3 or Boost, hence the static link; this checks that nothing else is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-device
cmake -S . -B "$build" -DGPUCRYPTFS_STATIC=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target gpu_math_test gpu_engine_test gpu_engine_bench gpucryptfs
rm -rf "$build/carry"
mkdir -p "$build/carry"
cp "$build/tests/gpu_math_test" "$build/tests/gpu_engine_test" "$build/tests/gpu_engine_bench" \
   "$build/mount/gpucryptfs" "$build/carry/"
strip --strip-debug "$build"/carry/* || true
for f in "$build"/carry/*; do
  extra=$(ldd "$f" | grep -v -E 'linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so' || true)
  if [ -n "$extra" ]; then
    echo "warning: $f needs more than libc at run time:" >&2
    echo "$extra" >&2
  fi
done
du -sh "$build/carry"
