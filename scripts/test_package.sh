#!/bin/bash
# The Debian package end to end, as root on a Debian 12 machine (CI runs it from scripts/test.sh):
# `cpack -G DEB` in the build directory, `dpkg -i`, then the installed binary, man page, completion
# and mount helper are used as a user would, an /etc/fstab-style line included (mount -T with a
# temporary fstab, through /usr/sbin/mount.fuse.gpucryptfs). The package is removed again at the
# end unless it was installed before.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
if [[ $(id -u) != 0 ]]; then echo "test_package.sh: needs root (dpkg -i); skipped"; exit 0; fi
was_installed=0
dpkg -s gpucryptfs >/dev/null 2>&1 && was_installed=1
(cd "$build" && rm -f gpucryptfs_*.deb && cpack -G DEB >/dev/null)
deb=$(ls "$build"/gpucryptfs_*.deb)
work=$(mktemp -d)
cleanup() {
  umount "$work/plain" 2>/dev/null || true
  rm -rf "$work"
  if [[ $was_installed == 0 ]]; then dpkg -r gpucryptfs >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
dpkg -i "$deb" >/dev/null
fail() { echo "test_package.sh: FAILED: $*" >&2; exit 1; }
[[ $(command -v gpucryptfs) == /usr/bin/gpucryptfs ]] || fail "gpucryptfs is not /usr/bin/gpucryptfs"
/usr/bin/gpucryptfs --version | grep -q '^gpucryptfs [0-9]' || fail "--version"
[[ $(readlink -f /usr/sbin/mount.fuse.gpucryptfs) == /usr/bin/gpucryptfs ]] || fail "the mount helper link"
dpkg -L gpucryptfs | grep -qx /usr/share/man/man1/gpucryptfs.1 || fail "no man page"
dpkg -L gpucryptfs | grep -qx /usr/share/bash-completion/completions/gpucryptfs || fail "no bash completion"
dpkg-deb -f "$deb" Depends | grep -q 'libfuse3-3' || fail "Depends lacks libfuse3-3"
# A vault, mounted from a temporary fstab by mount(8) and the installed helper, then unmounted.
mkdir -m 700 "$work/cipher" "$work/plain"
(umask 077 && echo "package test password" > "$work/pw")  # readable by root alone, as a password file should be
gpucryptfs init --quiet --scrypt-logn 10 --passfile "$work/pw" "$work/cipher"
echo "$work/cipher $work/plain fuse.gpucryptfs passfile=$work/pw,engine=cpu,log=$work/log,nofail,_netdev 0 0" > "$work/fstab"
mount -T "$work/fstab" "$work/plain" || fail "mount -T fstab: $(cat "$work/log" 2>/dev/null)"
echo "through the package" > "$work/plain/file"
umount "$work/plain"
sleep 0.5
mount -T "$work/fstab" "$work/plain" || fail "second mount"
[[ $(cat "$work/plain/file") == "through the package" ]] || fail "the file did not read back"
umount "$work/plain"
echo "test_package.sh: $(basename "$deb") installs and runs: binary, man page, completion, fstab mount"
