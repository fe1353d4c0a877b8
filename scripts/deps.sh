#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, only those missing.
# Sourced by scripts/demo and scripts/test; safe to run again.
set -euo pipefail
FG_DEBS=(build-essential cmake pkg-config libopenblas-dev libjansson-dev libzmq3-dev
         libaio-dev libxxhash-dev libglpk-dev libpcre2-dev libutf8proc-dev python3-numpy python3-regex python3-jsonschema fio clang
         libopenmpi-dev openmpi-bin)
missing=()
for p in "${FG_DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm (the JS tokenizer oracle, fetching GPT-2's vocabulary) may come
# from elsewhere than Debian (NodeSource): ask for the commands, not packages.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "flexgen: installing missing packages: ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "flexgen: error: need root to apt-get install ${missing[*]} (or install them yourself)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
