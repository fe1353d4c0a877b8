#!/bin/bash
# bench_disk.sh - the disk worker (flexgen-disk-worker, driven through the
# runtime by fg-bench-disk-worker) against fio on the same files in the same
# run, and a whole tier store read into shared memory through it.
#
#   bench/bench_disk.sh [--bin BUILD/bin] [--dir DIR] [--size 2G] [--runs 3]
#                       [--chunk 64M] [--inflight 4] [--model opt-1.3b] [--no-store]
#
# 1. Sequential read, then write, of one test file (--size, in --dir), each
#    contender once per run, the order rotated from run to run, --runs runs;
#    medians:
#      fio          ioengine=libaio direct=1 bs=1M iodepth=32, one job
#      disk worker  DISK_READ/DISK_WRITE commands of --chunk bytes, --inflight
#                   of them in flight (each on its own executor thread and
#                   libaio engine: 32 x 1 MiB requests), to and from shm
#      disk worker, 1 in flight: at most 32 x 1 MiB requests in flight, fio's
#                   depth, with the gaps between commands
#      fg_aio       the worker's engine alone, no runtime (flexgen-disk-bench)
#    and worker/fio (target >= 0.9).
# 2. The tier store of --dummy MODEL (built first into DIR/store, timed: the
#    conversion figure; removed at the end), every file's data region read
#    through the disk worker into one shm segment (checksums checked after
#    the clock stops), rotated with fio's read of the test file (the fio
#    figure), fio reading the store's own files, and fg_aio alone; medians
#    and worker/fio.
# 3. The store's checksum speed (XXH3, fg_store_checksum) and the cost of
#    verifying every checksum after a read.
#
# Figures are in 10^9 bytes/s. O_DIRECT keeps the guest's page cache out,
# but on a virtual machine the host may cache the virtual disk, and
# neighbours share it: figures move from run to run, so compare only figures
# from the same run (the load average is printed at the start and the end).
set -euo pipefail

BIN=${BIN:-}
DIR=${DIR:-}
SIZE=2G RUNS=3 CHUNK=64M INFLIGHT=4 MODEL=opt-1.3b STORE=1
BS=1M QD=32   # fio's and fg_aio's request size and depth; the worker's defaults
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --chunk) CHUNK=$2; shift 2 ;;
    --inflight) INFLIGHT=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --no-store) STORE=0; shift ;;
    *) echo "usage: $0 [--bin DIR] [--dir DIR] [--size 2G] [--runs 3] [--chunk 64M] [--inflight 4] [--model NAME] [--no-store]" >&2
       exit 2 ;;
    esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "$BIN" ]; then
    for b in "$HERE"/../build/bin "$HERE"/../build-*/bin; do
        [ -x "$b/fg-bench-disk-worker" ] && [ -x "$b/flexgen-disk-worker" ] && [ -x "$b/flexgen-disk-bench" ] && BIN=$b && break
    done
fi
for p in fg-bench-disk-worker flexgen-disk-worker flexgen-disk-bench; do
    [ -n "$BIN" ] && [ -x "$BIN/$p" ] || { echo "$p not found (HINT: cmake --build BUILD, or pass --bin BUILD/bin)" >&2; exit 2; }
done
DW=$BIN/fg-bench-disk-worker DB=$BIN/flexgen-disk-bench
if ! command -v fio >/dev/null || ! command -v jq >/dev/null; then
    echo "fio or jq missing: installing them (apt-get install -y fio jq)" >&2
    apt-get install -y fio jq >/dev/null || { echo "cannot install fio and jq" >&2; exit 2; }
fi
DIR=${DIR:-$PWD/bench-disk.tmp}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
F=$DIR/fg-bench-disk.dat
ST=$DIR/store
cleanup() { rm -f "$F"; rm -rf "$ST"; }
trap cleanup EXIT

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0) ? a / b : 0 }'; }
verdict() { awk -v r="$1" 'BEGIN { print (r >= 0.9) ? "ok, >= 0.9" : "BELOW 0.9" }'; }
kv() { sed -n "s/^$1=//p"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# fio's bandwidth in 10^9 B/s. $1: read|write, rest: fio file options.
fio_bw() {
    local rw=$1; shift
    fio --name=fg --ioengine=libaio --direct=1 --bs="$BS" --iodepth="$QD" --rw="$rw" "$@" \
        --output-format=json 2>/dev/null | sed -n '/^{/,$p' | jq ".jobs[0].$rw.bw_bytes / 1e9"
}

# One figure of each contender ($2...: function names), order rotated by
# run number $1; each appends to the variable named after it.
declare -A RES
round() {
    local r=$1; shift
    local c=("$@") n=$# i f
    for ((i = 0; i < n; i++)); do
        f=${c[$(((i + r) % n))]}
        RES[$f]="${RES[$f]:-} $($f)"
    done
}
med() { echo "${RES[$1]}" | median; }

# the contenders
fio_read()   { fio_bw read --filename="$F" --size="$SIZE"; }
fio_write()  { fio_bw write --filename="$F" --size="$SIZE"; }
fio_file()   { fio_read; }   # the same, in the store's rotation
dw_read()    { "$DW" read "$F" --chunk "$CHUNK" --inflight "$INFLIGHT" 2>/dev/null | kv read_GBps; }
dw_write()   { "$DW" write "$F" "$SIZE" --chunk "$CHUNK" --inflight "$INFLIGHT" 2>/dev/null | kv write_GBps; }
dw1_read()   { "$DW" read "$F" --chunk "$CHUNK" --inflight 1 2>/dev/null | kv read_GBps; }
dw1_write()  { "$DW" write "$F" "$SIZE" --chunk "$CHUNK" --inflight 1 2>/dev/null | kv write_GBps; }
aio_read()   { "$DB" read --file "$F" --bs "$BS" --qd "$QD" | kv read_GBps; }
aio_write()  { "$DB" write --file "$F" --size "$SIZE" --bs "$BS" --qd "$QD" | kv write_GBps; }
dw_store() {  # fails unless every tensor's checksum matched
    local out
    out=$("$DW" store "$SD" --chunk "$CHUNK" --inflight "$INFLIGHT" 2>/dev/null)
    [ "$(echo "$out" | kv verified)" = 1 ] || { echo "store read through the disk worker: checksums do not match" >&2; return 1; }
    echo "$out" | kv store_read_GBps
}
fio_store()  { fio_bw read --opendir="$SD" --file_service_type=sequential; }
aio_store()  { "$DB" store-read --store "$SD" --bs "$BS" --qd "$QD" | kv store_read_GBps; }

echo "disk benchmark: $(df -h "$DIR" | awk 'NR==2 {print $1 " mounted on " $6}'), dir $DIR, binaries $BIN"
echo "  file $SIZE; fio bs $BS iodepth $QD; disk worker: $CHUNK commands, $INFLIGHT in flight;" \
     "$RUNS rotated runs; $(nproc) cores, $(free -g | awk '/^Mem/ {print $2}') GiB memory, load $(load)"
echo "  (O_DIRECT skips this machine's page cache; a virtual disk's host may still cache the file)"
"$DW" write "$F" "$SIZE" 2>/dev/null >/dev/null   # lay the file out

# The store is built first, so that the file tests' I/O comes between its
# writing and its reading (caches below the file system see less of it).
if [ "$STORE" = 1 ]; then
    out=$("$DB" store-build --dummy "$MODEL" --dir "$ST" --fresh --bs "$BS" --qd "$QD" 2>/dev/null)
    SD=$(echo "$out" | kv store) SBYTES=$(echo "$out" | kv bytes)
    printf "store conversion (%s, dummy weights generated on the fly): %.2f GB in %.2f s = %.3f GB/s\n" \
        "$MODEL" "$(echo "$out" | kv bytes | awk '{print $1/1e9}')" "$(echo "$out" | kv seconds)" "$(echo "$out" | kv GBps)"
fi

# ---- 1. sequential read and write of the same file ----
for r in $(seq 1 "$RUNS"); do
    round "$r" fio_read dw_read dw1_read aio_read
    round "$r" fio_write dw_write dw1_write aio_write
done
for rw in read write; do
    fio=$(med fio_$rw) dw=$(med dw_$rw) dw1=$(med dw1_$rw) aio=$(med aio_$rw)
    printf "seq %-5s: fio %.3f GB/s | disk worker %.3f GB/s, ratio %s (%s)\n" "$rw" "$fio" "$dw" "$(ratio "$dw" "$fio")" \
        "$(verdict "$(ratio "$dw" "$fio")")"
    printf "            disk worker, 1 command in flight %.3f GB/s, ratio %s | fg_aio alone %.3f GB/s, ratio %s\n" \
        "$dw1" "$(ratio "$dw1" "$fio")" "$aio" "$(ratio "$aio" "$fio")"
    printf "            runs: fio%s | worker%s | worker 1%s | fg_aio%s\n" "${RES[fio_$rw]}" "${RES[dw_$rw]}" \
        "${RES[dw1_$rw]}" "${RES[aio_$rw]}"
done

# ---- 2. a whole tier store into shared memory ----
if [ "$STORE" = 1 ]; then
    for r in $(seq 1 "$RUNS"); do
        round "$r" fio_file dw_store fio_store aio_store
    done
    ff=$(med fio_file) sw=$(med dw_store) fs=$(med fio_store) sa=$(med aio_store)
    printf "store read (%s, %.2f GB in %d files, into one shm segment; every run's checksums matched):\n" "$MODEL" \
        "$(awk -v b="$SBYTES" 'BEGIN {print b/1e9}')" "$(ls "$SD"/*.bin | wc -l)"
    printf "            disk worker %.3f GB/s; fio on the test file %.3f GB/s, ratio %s (%s); fio on the store's files %.3f GB/s, ratio %s\n" \
        "$sw" "$ff" "$(ratio "$sw" "$ff")" "$(verdict "$(ratio "$sw" "$ff")")" "$fs" "$(ratio "$sw" "$fs")"
    printf "            fg_aio alone %.3f GB/s\n" "$sa"
    printf "            runs: worker%s | fio file%s | fio store%s | fg_aio%s\n" "${RES[dw_store]}" \
        "${RES[fio_file]}" "${RES[fio_store]}" "${RES[aio_store]}"
    v=$("$DB" store-read --store "$SD" --bs "$BS" --qd "$QD" --verify)
    printf "store read + verify every checksum (fg_aio, in line, after each file): %.3f GB/s, verify %.3f s of %.3f s\n" \
        "$(echo "$v" | kv store_read_GBps)" "$(echo "$v" | kv verify_seconds)" "$(echo "$v" | kv seconds)"
fi

# ---- 3. checksum speed ----
printf "checksum, XXH3 (one core): %.2f GB/s\n" "$("$DB" checksum --size 512M | kv checksum_GBps)"
echo "load at the end: $(load)"
