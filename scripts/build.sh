#!/usr/bin/env bash
# Configures and builds into build/ (RelWithDebInfo). Usage: scripts/build.sh [cmake args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
if ! cmake --build "$root/build" -j"$jobs" >"$root/build/build.log" 2>&1; then
  grep -E 'error|Error' "$root/build/build.log" | head -40 >&2
  echo "flexgen: error: build failed (full log: build/build.log)" >&2
  exit 1
fi
grep -E 'warning' "$root/build/build.log" >&2 || true
