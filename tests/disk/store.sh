#!/bin/sh
# The tier store's build / damage / rebuild cycle (disk_test store) on two
# pairs of small checkpoints, then the on-disk format checked by
# store_format.py against the checkpoint the store was last built from; then
# when the store is reused or rebuilt as its checkpoint stays, is copied,
# changes or is replaced (disk_test identity).
#   store.sh DISK_TEST PYTHON WORKDIR
set -eu
[ $# -eq 3 ] || { echo "usage: store.sh DISK_TEST PYTHON WORKDIR" >&2; exit 2; }
T=$1 PY=$2 W=$3
HERE=$(cd "$(dirname "$0")" && pwd)
MK=$HERE/../ref/make_checkpoint.py
rm -rf "$W" && mkdir -p "$W"
# A and B share the config name ("opt"), so B's store replaces A's: a changed
# model. C is the 350m style (post-LN, project_in/out, no final LN).
"$PY" "$MK" --out "$W/a" --layers 3 --hidden 64 --heads 4 --ffn 256 --vocab 1000 --max-pos 128 --seed 1
"$PY" "$MK" --out "$W/b" --layers 3 --hidden 64 --heads 4 --ffn 192 --vocab 1000 --max-pos 128 --seed 2
"$PY" "$MK" --out "$W/c" --layers 2 --hidden 96 --heads 6 --ffn 200 --vocab 997 --max-pos 100 --seed 3 \
    --post-ln --proj-dim 48 --format sharded --shards 2
"$T" store "$W/s1" "$W/a" "$W/b"
"$PY" "$HERE/store_format.py" "$W/s1/opt-fp16" "$W/b"
"$T" store "$W/s2" "$W/c" "$W/a"
"$PY" "$HERE/store_format.py" "$W/s2/opt-fp16" "$W/a"
# D: A's config with other weights; A2: a copy of A with the times kept; E: a
# FlexGen numpy directory.
"$PY" "$MK" --out "$W/d" --layers 3 --hidden 64 --heads 4 --ffn 256 --vocab 1000 --max-pos 128 --seed 4
cp -rp "$W/a" "$W/a2"
"$PY" "$MK" --out "$W/e" --layers 2 --hidden 64 --heads 4 --ffn 128 --vocab 500 --max-pos 64 --seed 5 --format npy
"$T" identity "$W/s3" "$W/a" "$W/a2" "$W/d" "$W/e"
rm -rf "$W"
