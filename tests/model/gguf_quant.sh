#!/usr/bin/env bash
# gguf_quant.sh FLEXGEN WORKDIR PYTHON [SCRIPT] - fetch gguf-py and llama.cpp's
# CPU build (or skip where they cannot be fetched) and run SCRIPT
# (gguf_quant.py by default; gguf_moe_quant.py for the mixtures of experts).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../fetch_or_skip.sh"
fetch_or_skip fetch-gguf-py.sh "gguf-py (llama.cpp's source in node-llama-cpp)"
fetch_or_skip fetch-llamacpp.sh "llama.cpp's CPU build (node-llama-cpp)"
exec "$3" "$here/${4:-gguf_quant.py}" "$1" "$2" "$("$here/../../scripts/fetch-gguf-py.sh")" \
  --llamacpp "$("$here/../../scripts/fetch-llamacpp.sh")"
