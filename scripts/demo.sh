#!/bin/bash
# The main job, end to end on a fresh Debian 12 machine as root: install what is missing, build,
# create a demo vault, mount it, write a file through the mount, and show that the plaintext goes
# in and only ciphertext (contents and name) lands in the backing folder. Unmounts on the way out.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
BUILD_TARGETS=gpucryptfs "$root/scripts/build.sh"   # the binary only: the tests are test.sh's
bin=${BUILD_DIR:-$root/build}/mount/gpucryptfs

demo=$(mktemp -d /tmp/gpucryptfs-demo.XXXXXX)
cipher=$demo/cipher plain=$demo/plain pass=$demo/password
mkdir -p "$cipher" "$plain"
echo "correct horse battery staple" > "$pass"
cleanup() { fusermount3 -u "$plain" 2>/dev/null || true; rm -rf "$demo"; }
trap cleanup EXIT

echo "== gpucryptfs init"
"$bin" init --passfile "$pass" --scrypt-logn 14 "$cipher"
echo "== gpucryptfs mount"
"$bin" mount --passfile "$pass" "$cipher" "$plain"
echo "== write a file in the mount"
echo "Meet me at the old mill at midnight." > "$plain/secret-plans.txt"
mkdir "$plain/photos"
echo "-- plaintext view ($plain):"
ls -la "$plain"
cat "$plain/secret-plans.txt"
echo "-- ciphertext view ($cipher):"
ls -la "$cipher"
f=$(find "$cipher" -maxdepth 1 -type f ! -name 'gpucryptfs.*' | head -n 1)
echo "-- first bytes of the stored file $(basename "$f"):"
od -A d -t x1 "$f" | head -n 5
if grep -rqa "old mill" "$cipher" || find "$cipher" | grep -q "secret-plans"; then
  echo "FAIL: plaintext reached the backing folder" >&2
  exit 1
fi
echo "OK: the backing folder holds no plaintext name or content"
"$bin" info "$cipher"
