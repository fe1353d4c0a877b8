#!/usr/bin/env bash
# gguf_quant.sh FLEXGEN WORKDIR PYTHON - fetch gguf-py and llama.cpp's CPU
# build (or skip where they cannot be fetched) and run gguf_quant.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../fetch_or_skip.sh"
fetch_or_skip fetch-gguf-py.sh "gguf-py (llama.cpp's source in node-llama-cpp)"
fetch_or_skip fetch-llamacpp.sh "llama.cpp's CPU build (node-llama-cpp)"
exec "$3" "$here/gguf_quant.py" "$1" "$2" "$("$here/../../scripts/fetch-gguf-py.sh")" \
  --llamacpp "$("$here/../../scripts/fetch-llamacpp.sh")"
