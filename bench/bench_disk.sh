#!/bin/bash
# bench_disk.sh - the disk tier's engine (store/fg_aio) against fio on the
# same file in the same run, and a whole tier store read into shared memory.
#
#   bench/bench_disk.sh [--bin BUILD/bin] [--dir DIR] [--size 1G] [--runs 3]
#                       [--bs 1M] [--qd 32] [--model opt-1.3b] [--no-store]
#
# 1. Sequential read, then write, of one test file (--size, in --dir):
#    fio (ioengine=libaio, direct=1, bs, iodepth) and flexgen-disk-bench
#    (same bs and queue depth), alternating which goes first, --runs times.
#    Prints both medians and ours/fio (target >= 0.9).
# 2. The tier store of --dummy MODEL (built first into DIR/store, timed: the
#    conversion figure; removed at the end) read file by file into one
#    4096-aligned shared-memory segment through fg_aio, alternating with
#    fio's sequential read of the test file (the fio figure) and fio reading
#    the store's own files; medians and ratios.
# 3. XXH64 speed and the cost of verifying every checksum after the read.
#
# Figures are in 10^9 bytes/s. On a shared or virtual machine the host's
# caches and neighbours move them: compare only figures from the same run.
set -euo pipefail

BIN=${BIN:-}
DIR=${DIR:-}
SIZE=1G RUNS=3 BS=1M QD=32 MODEL=opt-1.3b STORE=1
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --bs) BS=$2; shift 2 ;;
    --qd) QD=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --no-store) STORE=0; shift ;;
    *) echo "usage: $0 [--bin DIR] [--dir DIR] [--size 1G] [--runs 3] [--bs 1M] [--qd 32] [--model NAME] [--no-store]" >&2
       exit 2 ;;
    esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "$BIN" ]; then
    for b in "$HERE/../build/bin" "$HERE/../build-disk/bin"; do
        [ -x "$b/flexgen-disk-bench" ] && BIN=$b && break
    done
fi
DB=$BIN/flexgen-disk-bench
[ -x "$DB" ] || { echo "flexgen-disk-bench not found (build first, or pass --bin)" >&2; exit 2; }
if ! command -v fio >/dev/null; then
    echo "fio missing: installing it (apt-get install -y fio)" >&2
    apt-get install -y fio >/dev/null || { echo "cannot install fio" >&2; exit 2; }
fi
DIR=${DIR:-$PWD/bench-disk.tmp}
mkdir -p "$DIR"
F=$DIR/fg-bench-disk.dat
ST=$DIR/store
cleanup() { rm -f "$F"; rm -rf "$ST"; }
trap cleanup EXIT

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0) ? a / b : 0 }'; }
kv() { sed -n "s/^$1=//p"; }

# fio's bandwidth in 10^9 B/s. $1: read|write, rest: fio file options.
fio_bw() {
    local rw=$1; shift
    fio --name=fg --ioengine=libaio --direct=1 --bs="$BS" --iodepth="$QD" --rw="$rw" "$@" \
        --output-format=json 2>/dev/null | sed -n '/^{/,$p' | jq ".jobs[0].$rw.bw_bytes / 1e9"
}

echo "disk benchmark: $(df -h "$DIR" | awk 'NR==2 {print $1 " mounted on " $6}'), dir $DIR"
echo "  file $SIZE, bs $BS, iodepth $QD, $RUNS alternating runs; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$DB" write --file "$F" --size "$SIZE" --bs "$BS" --qd "$QD" >/dev/null   # lay the file out

# The store is built first, so that the file tests' I/O comes between its
# writing and its reading (caches below the file system see less of it).
if [ "$STORE" = 1 ]; then
    out=$("$DB" store-build --dummy "$MODEL" --dir "$ST" --fresh --bs "$BS" --qd "$QD" 2>/dev/null)
    SD=$(echo "$out" | kv store)
    printf "store conversion (%s, dummy weights generated on the fly): %.2f GB in %.2f s = %.3f GB/s\n" \
        "$MODEL" "$(echo "$out" | kv bytes | awk '{print $1/1e9}')" "$(echo "$out" | kv seconds)" "$(echo "$out" | kv GBps)"
fi

# ---- 1. sequential read and write of the same file ----
fr="" or="" fw="" ow=""
for r in $(seq 1 "$RUNS"); do
    if [ $((r % 2)) -eq 1 ]; then
        fr="$fr $(fio_bw read --filename="$F" --size="$SIZE")"
        or="$or $("$DB" read --file "$F" --bs "$BS" --qd "$QD" | kv read_GBps)"
        fw="$fw $(fio_bw write --filename="$F" --size="$SIZE")"
        ow="$ow $("$DB" write --file "$F" --size "$SIZE" --bs "$BS" --qd "$QD" | kv write_GBps)"
    else
        or="$or $("$DB" read --file "$F" --bs "$BS" --qd "$QD" | kv read_GBps)"
        fr="$fr $(fio_bw read --filename="$F" --size="$SIZE")"
        ow="$ow $("$DB" write --file "$F" --size "$SIZE" --bs "$BS" --qd "$QD" | kv write_GBps)"
        fw="$fw $(fio_bw write --filename="$F" --size="$SIZE")"
    fi
done
FR=$(echo "$fr" | median) OR=$(echo "$or" | median) FW=$(echo "$fw" | median) OW=$(echo "$ow" | median)
printf "seq read : fio %.3f GB/s, fg_aio %.3f GB/s, ratio %s   (runs fio:%s | ours:%s)\n" "$FR" "$OR" "$(ratio "$OR" "$FR")" "$fr" "$or"
printf "seq write: fio %.3f GB/s, fg_aio %.3f GB/s, ratio %s   (runs fio:%s | ours:%s)\n" "$FW" "$OW" "$(ratio "$OW" "$FW")" "$fw" "$ow"

# ---- 2. a whole tier store into shared memory ----
if [ "$STORE" = 1 ]; then
    sr="" ff="" fs=""
    for r in $(seq 1 "$RUNS"); do
        if [ $((r % 2)) -eq 1 ]; then
            ff="$ff $(fio_bw read --filename="$F" --size="$SIZE")"
            sr="$sr $("$DB" store-read --store "$SD" --bs "$BS" --qd "$QD" | kv store_read_GBps)"
            fs="$fs $(fio_bw read --opendir="$SD" --file_service_type=sequential)"
        else
            fs="$fs $(fio_bw read --opendir="$SD" --file_service_type=sequential)"
            sr="$sr $("$DB" store-read --store "$SD" --bs "$BS" --qd "$QD" | kv store_read_GBps)"
            ff="$ff $(fio_bw read --filename="$F" --size="$SIZE")"
        fi
    done
    SR=$(echo "$sr" | median) FF=$(echo "$ff" | median) FS=$(echo "$fs" | median)
    printf "store read (%s, every file into one shm segment): fg_aio %.3f GB/s; fio on the test file %.3f GB/s, ratio %s; fio on the store's files %.3f GB/s, ratio %s\n" \
        "$MODEL" "$SR" "$FF" "$(ratio "$SR" "$FF")" "$FS" "$(ratio "$SR" "$FS")"
    printf "   (runs ours:%s | fio file:%s | fio store:%s)\n" "$sr" "$ff" "$fs"
    v=$("$DB" store-read --store "$SD" --bs "$BS" --qd "$QD" --verify)
    printf "store read + verify every checksum (in line, after each file): %.3f GB/s, verify %.3f s of %.3f s\n" \
        "$(echo "$v" | kv store_read_GBps)" "$(echo "$v" | kv verify_seconds)" "$(echo "$v" | kv seconds)"
fi

# ---- 3. checksum speed ----
printf "xxh64 (one core): %.2f GB/s\n" "$("$DB" checksum --size 512M | kv xxh64_GBps)"
