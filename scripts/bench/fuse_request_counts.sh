#!/bin/bash
# How many FUSE requests of each kind a command makes the kernel send, on every FUSE connection
# of this machine (keep other FUSE work quiet meanwhile), from the kernel's fuse_request_send
# tracepoint in a tracefs instance of our own (other tracing is left alone).
#
#   scripts/bench/fuse_request_counts.sh COMMAND [ARGS...]     (needs root; kernel 6.15 or newer)
#
# Prints one line per opcode, most frequent first, then the total; the command's own output goes
# to stderr. PER=N divides every count by N as well (requests per file, with N files). MNT=DIR
# counts only the requests of the FUSE mount at DIR (mounted before the command starts), so that a
# vault on an sshfs share is counted apart from the share.
set -euo pipefail
[[ $(id -u) == 0 ]] || { echo "fuse_request_counts: needs root" >&2; exit 1; }
t=/sys/kernel/tracing
[[ -d $t/events ]] || mount -t tracefs nodev "$t"
[[ -d $t/events/fuse/fuse_request_send ]] || { echo "fuse_request_counts: this kernel has no fuse tracepoints" >&2; exit 1; }
inst=$t/instances/gcfs_requests_$$
log=$(mktemp)
mkdir "$inst"
reader=
trap '[[ -n $reader ]] && kill "$reader" 2>/dev/null; echo 0 > "$inst/events/fuse/fuse_request_send/enable" 2>/dev/null; rmdir "$inst"; rm -f "$log"' EXIT
echo 65536 >"$inst/buffer_size_kb"
echo 1 >"$inst/events/fuse/fuse_request_send/enable"
# Read while the command runs, so a long command does not overrun the buffer.
cat "$inst/trace_pipe" >"$log" 2>/dev/null &
reader=$!
status=0
"$@" >&2 || status=$?
sleep 0.5
echo 0 >"$inst/events/fuse/fuse_request_send/enable"
sleep 0.2
kill "$reader" 2>/dev/null || true
wait "$reader" 2>/dev/null || true
reader=
conn=""
# The tracepoint names the connection by the kernel's dev_t: major << 20 | minor.
if [[ -n ${MNT:-} ]]; then read -r maj min < <(stat -c '%Hd %Ld' "$MNT"); conn="connection $((maj << 20 | min)) "; fi
grep -F -- "$conn" "$log" | grep -o '(FUSE_[A-Z0-9_]*)' | tr -d '()' | sort | uniq -c | sort -rn |
  awk -v per="${PER:-0}" '{ t += $1; printf "%9d %-22s", $1, $2; if (per > 0) printf " %8.2f per item", $1 / per; print "" }
    END { printf "%9d total", t; if (per > 0) printf "%25.2f per item", t / per; print "" }'
[[ $status == 0 ]] || echo "fuse_request_counts: the command exited with status $status" >&2
exit 0
