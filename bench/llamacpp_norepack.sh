#!/usr/bin/env bash
# Builds bench/llamacpp_norepack.c (llama.cpp's --no-repack as an LD_PRELOAD
# shim) against the llama.h of node-llama-cpp's own llama.cpp source, so the
# struct is the binary's: the headers from llama/gitRelease.bundle are
# checked out into DIR/llama.cpp, the shim written to DIR/norepack.so, and
# its path printed. Used by bench_llamacpp.sh (NOREPACK=1) and bench_moe.sh.
# Usage: bench/llamacpp_norepack.sh LIB DIR   (LIB: scripts/fetch-llamacpp.sh's output)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$1 dir=$2
if ! git clone -q --no-checkout "$lib/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$dir/llama.cpp" ||
   ! git -C "$dir/llama.cpp" checkout -q HEAD -- include ggml/include ||
   ! cc -shared -fPIC -O2 -I"$dir/llama.cpp/include" -I"$dir/llama.cpp/ggml/include" -o "$dir/norepack.so" \
       "$root/bench/llamacpp_norepack.c" -ldl; then
  echo "llamacpp_norepack: the --no-repack shim cannot be built" >&2
  exit 1
fi
echo "$dir/norepack.so"
