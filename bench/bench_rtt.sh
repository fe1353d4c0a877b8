#!/bin/sh
# bench_rtt.sh - command round trips coordinator -> worker -> DONE over ipc://
# (and tcp on loopback for comparison): p50/p99 latency in microseconds and
# commands per second, one at a time and with a pipeline of commands in flight.
#
#   bench/bench_rtt.sh [BUILD_DIR] [COUNT]      defaults: build, 100000
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
n=${2:-100000}
drv=$build/bin/fg-bench-rtt
gpu=$build/bin/flexgen-gpu-worker
for f in "$drv" "$gpu"; do
  if [ ! -x "$f" ]; then
    echo "bench_rtt.sh: $f not built (HINT: cmake --build $build)" >&2
    exit 2
  fi
done
echo "== $n round trips, $(nproc) CPUs, $(uname -r)"
"$drv" --worker "$gpu" -n "$n" --depth 1,8,64
echo "== for scale: the transport alone"
"$drv" --raw -n "$n"
echo "== the same over tcp://127.0.0.1"
"$drv" --worker "$gpu" -n "$n" --depth 1,64 --endpoint 'tcp://127.0.0.1:*'
