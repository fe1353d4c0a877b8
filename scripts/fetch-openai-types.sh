#!/usr/bin/env bash
# fetch-openai-types.sh - puts the Batch API tests' independent reader into
# the FlexGen cache, once: ${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/openai-ts/
#   node_modules/openai       openai 4.77.0 (OpenAI's own Node client: its
#                             ChatCompletion and Completion types)
#   node_modules/typescript   typescript 5.6.3 (tsc, to check output lines
#                             against those types)
# Each package is fetched with `npm pack` at its pinned version and checked
# against the sha256 of its tarball before anything is kept. Exit status: 0
# ok, 3 the npm registry could not be reached (tests skip), 1 anything else.
set -euo pipefail
NPM_CACHE_WHO=fetch-openai-types
. "$(dirname "$0")/npm-cache.sh"

dir="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/openai-ts"
pkgs=(
  "openai@4.77.0 d448c493467ffa6bcf20896e2d10a7a8049fee03ea906246b003d654e4fd9186 openai"
  "typescript@5.6.3 ef67f8d8ad895858024b7339d3e34bf112cae3c5db1f538c3079038b17ae30fa typescript"
)
stamp="$dir/.complete-$(printf '%s\n' "${pkgs[@]}" | sha256sum | cut -c1-16)"
[ -f "$stamp" ] && exit 0
npm_cache_need 1 npm node
npm_cache_tmp
stage="$npm_tmp/stage"
mkdir -p "$stage/node_modules"
for p in "${pkgs[@]}"; do
  read -r spec sum name <<<"$p"
  npm_cache_unpack "$spec" "$npm_tmp/pack" "$sum"
  mv "$npm_tmp/pack/package" "$stage/node_modules/$name"
  rm -rf "$npm_tmp/pack"
done
npm_cache_install "$stage" "$dir" "$(basename "$stamp")"
echo "fetch-openai-types: openai's types and tsc in $dir" >&2
