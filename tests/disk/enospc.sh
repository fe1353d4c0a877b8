#!/bin/sh
# A full file system under the engine and under a store conversion: a small
# size-limited tmpfs (needs root: exit 77, a skip, where mounting is not
# permitted). The checkpoint (about 13 MB of fp16) cannot fit in 8 MiB.
#   enospc.sh DISK_TEST PYTHON WORKDIR
set -u
[ $# -eq 3 ] || { echo "usage: enospc.sh DISK_TEST PYTHON WORKDIR" >&2; exit 2; }
T=$1 PY=$2 W=$3
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W" && mkdir -p "$W/mnt" || exit 1
if ! mount -t tmpfs -o size=8M,mode=0700 fgtest "$W/mnt" 2>/dev/null; then
    echo "SKIP: cannot mount a tmpfs (not root?)"
    exit 77
fi
trap 'umount "$W/mnt" 2>/dev/null; rm -rf "$W"' EXIT
"$PY" "$HERE/../ref/make_checkpoint.py" --out "$W/ckpt" --layers 2 --hidden 512 --heads 8 --ffn 2048 \
    --vocab 1000 --max-pos 128 --seed 1 || exit 1
"$T" enospc "$W/mnt" "$W/ckpt"
