#!/usr/bin/env bash
# fetch-llamacpp-vocabs.sh - llama.cpp's test vocabularies (models/ggml-vocab-*
# .gguf with their .inp/.out vectors) out of the llama.cpp source that
# node-llama-cpp ships as a git bundle (scripts/fetch-llamacpp.sh installs
# it), into ${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/llamacpp-vocab/models.
# They are not in this repository (tens of MB). Idempotent; prints the
# folder. Exit status: 3 when node-llama-cpp cannot be installed here (tests
# skip), 1 anything else.
set -euo pipefail
cache="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}"
dir="$cache/llamacpp-vocab"
if [ -f "$dir/.complete" ]; then echo "$dir/models"; exit 0; fi
rc=0; lc=$("$(dirname "$0")/fetch-llamacpp.sh") || rc=$?
[ "$rc" = 0 ] || exit "$rc"
bundle="$lc/node_modules/node-llama-cpp/llama/gitRelease.bundle"
[ -f "$bundle" ] || { echo "fetch-llamacpp-vocabs: error: no $bundle" >&2; exit 1; }
stage="$dir.tmp.$$"
rm -rf "$stage"; trap 'rm -rf "$stage"' EXIT
git clone -q --no-checkout "$bundle" "$stage" 2>/dev/null
git -C "$stage" checkout -q HEAD -- models
rm -rf "$dir"; mv "$stage" "$dir"; trap - EXIT
touch "$dir/.complete"
echo "$dir/models"
