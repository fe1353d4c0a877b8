#!/usr/bin/env bash
# bench_tokenizer.sh - tokenizer throughput on one core: the C tokenizer with
# and without its word cache, and the JavaScript encoder of gpt-3-encoder, on
# the same text in the same run. Two corpora from tests/tokenizer/gen_corpus.py:
#   mixed  the tests' corpus (~1.9 MB: prose, code, numbers, white space,
#          accented Latin, CJK, emoji, unusual Unicode, a sweep of Unicode 14),
#          where most pieces are rare and the cache has little to reuse;
#   prose  English prose only (0.5 MB), where words repeat and the cache pays.
# Documents are a few KB, encoded one by one as prompts are. Each side runs
# RUNS times (default 5), each run from an empty cache; medians and ratios are
# printed. Exit 1 when the target (C >= 5 MB/s with and without the cache, and
# faster than JS) is missed on either corpus.
# Usage: bench/bench_tokenizer.sh [BUILD_DIR]   (default build/; env RUNS)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/tok_bench_setup.sh"
tok_bench_setup bench_tokenizer "${1:-}"
"$root/scripts/fetch-gpt2-vocab.sh"
gpt2="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/gpt2"

"$py" "$root/tests/tokenizer/gen_corpus.py" "$work/mixed.json" --mb 1.5 2>/dev/null
"$py" "$root/tests/tokenizer/gen_corpus.py" "$work/prose.json" --mb 0.5 --kinds prose 2>/dev/null
for c in mixed prose; do
  "${pin[@]}" "$bench" --gpt2 --runs "$runs" "$work/$c.json" >"$work/$c.c.json"
  "${pin[@]}" node "$root/bench/tokenizer_js_bench.js" "$gpt2" "$work/$c.json" "$runs" >"$work/$c.js.json"
done

"$py" "$root/bench/tok_bench_report.py" "$work" mixed prose --gpt2
