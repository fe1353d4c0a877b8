#!/usr/bin/env bash
# The GPU checks, as one script for a machine with an NVIDIA GPU: builds with
# CUDA and runs the tests that need a device (they skip elsewhere), printing
# what they measured. Usage: scripts/gpu-check.sh [OUT_DIR]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${OUT:-$root/build/gpu-check}}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$out/gpu.txt"
"$root/scripts/deps.sh"
"$root/scripts/build.sh" -DFG_CUDA=ON 2>&1 | tail -20
cd "$root/build" && ctest --output-on-failure -R 'cuda|gpu' -V 2>&1 | tee "$out/ctest-gpu.log" | grep -E 'cuda_|Passed|Failed|Skipped|tests passed'
