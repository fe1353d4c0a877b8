#!/usr/bin/env bash
# fetch-gguf-py.sh - llama.cpp's Python GGUF package (gguf-py: a GGUF writer
# and reader, numpy quantize/dequantize of every ggml type) out of the
# llama.cpp source that node-llama-cpp ships as a git bundle
# (scripts/fetch-llamacpp.sh installs it), into
# ${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/gguf-py (put it on PYTHONPATH). The
# format tests use its dequantize as the outside oracle of the engine's
# (common/fg_fmt.h); it needs numpy only. Idempotent; prints the folder.
# Exit status: 3 when node-llama-cpp cannot be installed here (tests skip),
# 1 anything else.
set -euo pipefail
cache="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}"
dir="$cache/gguf-py"
if [ -f "$dir/.complete" ]; then echo "$dir"; exit 0; fi
rc=0; lc=$("$(dirname "$0")/fetch-llamacpp.sh") || rc=$?
[ "$rc" = 0 ] || exit "$rc"
bundle="$lc/node_modules/node-llama-cpp/llama/gitRelease.bundle"
[ -f "$bundle" ] || { echo "fetch-gguf-py: error: no $bundle" >&2; exit 1; }
stage="$dir.tmp.$$"
rm -rf "$stage"; trap 'rm -rf "$stage"' EXIT
git clone -q --no-checkout "$bundle" "$stage/src" 2>/dev/null
git -C "$stage/src" checkout -q HEAD -- gguf-py
mv "$stage/src/gguf-py/gguf" "$stage/gguf"; rm -rf "$stage/src"
rm -rf "$dir"; mv "$stage" "$dir"; trap - EXIT
touch "$dir/.complete"
echo "$dir"
