#!/bin/sh
# A read error from the device under a tier store file: ext4 on a loop
# device whose backing file is cut short after the store is written, so
# reads of the lost blocks fail with EIO in the block layer (a real I/O
# error, not an injected one; tests/disk aio-faults covers the injected
# kind). Needs root, losetup, mkfs.ext4 and filefrag: exit 77 (skip) if not.
#   eio.sh DISK_TEST DISK_BENCH PYTHON WORKDIR
set -u
[ $# -eq 4 ] || { echo "usage: eio.sh DISK_TEST DISK_BENCH PYTHON WORKDIR" >&2; exit 2; }
T=$1 BENCH=$2 PY=$3 W=$4
HERE=$(cd "$(dirname "$0")" && pwd)
for tool in losetup mkfs.ext4 filefrag mount; do
    command -v $tool >/dev/null 2>&1 || { echo "SKIP: $tool not found"; exit 77; }
done
rm -rf "$W" && mkdir -p "$W/mnt" || exit 1
truncate -s 64M "$W/img" || exit 1
LOOP=$(losetup -f --show "$W/img" 2>/dev/null) || { echo "SKIP: cannot attach a loop device"; rm -rf "$W"; exit 77; }
trap 'umount "$W/mnt" 2>/dev/null; losetup -d "$LOOP"; rm -rf "$W"' EXIT
mkfs.ext4 -q -F -b 4096 "$LOOP" || exit 1
mount "$LOOP" "$W/mnt" || { echo "SKIP: cannot mount ext4 on $LOOP"; exit 77; }
"$PY" "$HERE/../ref/make_checkpoint.py" --out "$W/ckpt" --layers 2 --hidden 256 --heads 4 --ffn 1024 \
    --vocab 1000 --max-pos 128 --seed 1 || exit 1
"$BENCH" store-build --model "$W/ckpt" --dir "$W/mnt" >/dev/null || exit 1
STORE=$W/mnt/opt-fp16
FILE=$STORE/layer-001.bin
# read-only from here: no journal or atime write may grow the image back
mount -o remount,ro "$W/mnt" || exit 1
# the file's first physical block (filefrag -v prints 4096-byte fs blocks)
PHYS=$(filefrag -v "$FILE" | awk '$1 == "0:" { sub(/\.\..*/, "", $4); print $4; exit }')
[ -n "$PHYS" ] || { echo "cannot map $FILE"; exit 1; }
# keep the header block and one data block, lose the rest of the image
truncate -s $(( (PHYS + 2) * 4096 )) "$W/img" || exit 1
"$T" eio "$STORE" "$FILE"
