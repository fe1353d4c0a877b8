#!/usr/bin/env bash
# gemm_check.sh GEMM_TOOL PYTHON - fetch gguf-py (or skip where it cannot be
# fetched) and run gemm_check.py: the int16 kernels against gguf-py's weights.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../fetch_or_skip.sh"
fetch_or_skip fetch-gguf-py.sh "gguf-py (llama.cpp's source in node-llama-cpp)"
exec "$2" "$here/gemm_check.py" "$1" "$("$here/../../scripts/fetch-gguf-py.sh")"
