#!/bin/bash
# How many system calls the daemon makes on the backing store for each small file read (and
# written) through a mounted vault: for each content format, file size and FUSE transport, N
# files are written through the mount, the vault is mounted afresh (a daemon with nothing
# cached), and then, with strace attached to every thread of the daemon and the kernel's caches
# dropped before each phase:
#   lookup: `stat` of every file (the kernel's LOOKUPs: names, attributes);
#   cat:    `cat` of every file (LOOKUP, then OPEN, READ, FLUSH, RELEASE), as compare.sh's
#           "read every file" does; cat - lookup is what the read itself costs;
#   untar:  `tar -x` of the same files into a new folder (CREATE, WRITE, SETATTR, RELEASE), as
#           compare.sh's "untar" does.
# Prints, per case and phase, the calls per file of each system call that touches the backing
# store (file and descriptor calls; the transport's own /dev/fuse and io_uring calls are left
# out), and their total. With TRACE=1, also the sequence of those calls for one file's cat.
#
#   scripts/bench/backing_calls_per_file.sh BIN        (needs root, strace)
#
# Knobs (environment): N (files per case, default 50), FORMATS (default "2 1"), SIZES (bytes,
# default "1024 10240"), TRANSPORTS (default "classic uring"), ROOT (default /dev/shm/backing_calls),
# MOUNT_ARGS (more mount options), TRACE (1: print one file's call sequence per case).
# A count, not a timing: the numbers do not depend on the machine's load.
set -u
(($# == 1)) || { sed -n 2,22p "$0"; exit 2; }
[[ $(id -u) == 0 ]] || { echo "backing_calls_per_file: needs root (it drops caches and mounts)" >&2; exit 1; }
command -v strace >/dev/null || { echo "backing_calls_per_file: needs strace" >&2; exit 1; }
bin=$(realpath "$1")
n=${N:-50} root=${ROOT:-/dev/shm/backing_calls}
# System calls that go to the transport (not to the backing store), and the tracer's own noise.
transport_calls='io_uring_enter|io_uring_setup|io_uring_register|futex|read_fuse|writev|poll|ppoll|epoll_wait|restart_syscall|rt_sigprocmask|rt_sigtimedwait|madvise|mmap|munmap|mprotect|sched_yield|clock_gettime|gettid|getpid|nanosleep|clock_nanosleep'
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# Runs a command with strace on the daemon; prints "call count" lines for backing calls, per file.
count() {  # pid label command...
  local pid=$1 label=$2 out
  shift 2
  out=$(mktemp)
  # -y: descriptors with their paths, so that reads of /dev/fuse are told from reads of files.
  strace -f -y -qq -o "$out" -p "$pid" &
  local tracer=$!
  sleep 1
  drop
  "$@" > /dev/null
  sleep 0.5
  kill -INT "$tracer"; wait "$tracer" 2> /dev/null
  # One line per call; a read or write on /dev/fuse is the transport's.
  awk -v n="$n" -v label="$label" -v skip="^($transport_calls)$" '
    { sub(/^[0-9]+ +/, "") }
    /^(<\.\.\.|\+\+\+|---)/ { next }
    {
      name = $0; sub(/\(.*/, "", name)
      if (name ~ skip || name == "") next
      if ((name == "read" || name == "write") && $0 ~ /<\/dev\/fuse>/) next
      c[name]++; total++
    }
    END {
      line = label ":"
      for (k in c) line = line sprintf(" %s=%.2f", k, c[k] / n)
      printf "%s | total %.2f per file\n", line, total / n
    }' "$out"
  rm -f "$out"
}

echo "== $(date -u +%FT%TZ) $(nproc) cpus, kernel $(uname -r), $("$bin" --version 2>/dev/null | head -1), $n files per case"
for transport in ${TRANSPORTS:-classic uring}; do
  [[ $transport == uring ]] && echo 1 > /sys/module/fuse/parameters/enable_uring
  for format in ${FORMATS:-2 1}; do
    for size in ${SIZES:-1024 10240}; do
      rm -rf "$root"; mkdir -p "$root/c" "$root/m"; echo "backing-calls-password" > "$root/pw"
      "$bin" init --passfile "$root/pw" --scrypt-logn 10 --format "$format" "$root/c" > /dev/null || exit 1
      mnt() {
        # shellcheck disable=SC2086
        "$bin" mount --passfile "$root/pw" --transport "$transport" --log "$root/log" ${MOUNT_ARGS:-} "$root/c" "$root/m" ||
          exit 1
        pid=$(pgrep -n -f "mount .*$root/c")
      }
      mnt
      mkdir "$root/m/d"
      head -c "$size" /dev/urandom > "$root/one"
      for i in $(seq 1 "$n"); do cp "$root/one" "$root/m/d/f$i"; done
      fusermount3 -u "$root/m"; sleep 0.5
      mnt
      case="format $format, $size bytes, $transport"
      count "$pid" "$case, lookup" bash -c "stat $root/m/d/f* > /dev/null"
      count "$pid" "$case, cat" bash -c "cat $root/m/d/f* > /dev/null"
      cmp -s "$root/one" "$root/m/d/f1" || echo "$case: f1 reads back wrong"
      mkdir "$root/t"
      for i in $(seq 1 "$n"); do cp -p "$root/one" "$root/t/f$i"; done
      tar -C "$root" -cf "$root/t.tar" t
      count "$pid" "$case, untar" tar -C "$root/m" -xf "$root/t.tar"
      cmp -s "$root/one" "$root/m/t/f1" || echo "$case: t/f1 reads back wrong"
      if [[ ${TRACE:-0} == 1 ]]; then
        fusermount3 -u "$root/m"; sleep 0.5
        mnt
        out=$(mktemp)
        strace -f -y -qq -e 'trace=%file,%desc,fstat,newfstatat,statx' -o "$out" -p "$pid" &
        tracer=$!
        sleep 1
        drop
        cat "$root/m/d/f1" > /dev/null
        sleep 0.5
        kill -INT "$tracer"; wait "$tracer" 2> /dev/null
        echo "-- $case: one file's cat (lookup, open, read, release)"
        grep -v -E '</dev/fuse>|io_uring|resumed>' "$out" | sed -E 's/^[0-9]+ +/  /'
        rm -f "$out"
      fi
      fusermount3 -u "$root/m"; sleep 0.5
    done
  done
done
rm -rf "$root"
