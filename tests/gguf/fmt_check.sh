#!/usr/bin/env bash
# fmt_check.sh GGUF_TOOL PYTHON - fetch gguf-py (or skip where it cannot be
# fetched) and run fmt_check.py: the engine's dequantizers against gguf-py's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../fetch_or_skip.sh"
fetch_or_skip fetch-gguf-py.sh "gguf-py (llama.cpp's source in node-llama-cpp)"
exec "$2" "$here/fmt_check.py" "$1" "$("$here/../../scripts/fetch-gguf-py.sh")"
