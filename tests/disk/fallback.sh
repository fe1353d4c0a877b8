#!/bin/sh
# The buffered fallback where a file system refuses O_DIRECT: ramfs has no
# direct I/O at all (tmpfs has it on kernels >= 6.6, so it no longer shows
# the fallback). The round trips must pass through the fallback, and the
# engine must say it fell back. Needs root to mount: exit 77 (skip) if not.
#   fallback.sh DISK_TEST WORKDIR
set -u
[ $# -eq 2 ] || { echo "usage: fallback.sh DISK_TEST WORKDIR" >&2; exit 2; }
T=$1 W=$2
rm -rf "$W" && mkdir -p "$W/mnt" || exit 1
if ! mount -t ramfs fgtest "$W/mnt" 2>/dev/null; then
    echo "SKIP: cannot mount a ramfs (not root?)"
    exit 77
fi
trap 'umount "$W/mnt" 2>/dev/null; rm -rf "$W"' EXIT
"$T" aio "$W/mnt" 2>"$W/log"
rc=$?
grep -v "ok (expected" "$W/log"
[ $rc -eq 0 ] || exit 1
grep -q "does not support O_DIRECT; using buffered I/O" "$W/log" || { echo "FAIL: no fallback warning"; exit 1; }
echo "fallback: PASS"
