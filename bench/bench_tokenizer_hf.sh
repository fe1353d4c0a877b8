#!/usr/bin/env bash
# bench_tokenizer_hf.sh - tokenizer.json throughput on one core: the C
# tokenizer (flexgen-tok-bench, word cache on and off) beside the JavaScript
# port of Hugging Face's tokenizers (@lenml/tokenizers) on the same ~1 MB of
# text, for the Llama 2 style (SentencePiece BPE), Llama 3 and Qwen3
# tokenizers fetched by scripts/fetch-tokenizers.sh. The text is
# tests/tokenizer/gen_hf_corpus.py's: this machine's documents (licenses,
# manuals and message catalogs in many languages, source code, ...), a few KB
# each, encoded one by one as prompts are; special tokens in the text are
# honoured on both sides and none is added. Each side runs RUNS times
# (default 5), each from an empty cache; medians and ratios are printed, and
# both sides' token counts must agree. Loading is not timed (printed apart).
# Usage: bench/bench_tokenizer_hf.sh [BUILD_DIR]   (default build/; env RUNS, MODELS)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
models=${MODELS:-llama2 llama3 qwen3}
. "$root/bench/tok_bench_setup.sh"
tok_bench_setup bench_tokenizer_hf "${1:-}"
"$root/scripts/fetch-tokenizers.sh"
cache="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/hf-tokenizers"
"$py" "$root/tests/tokenizer/gen_hf_corpus.py" "$work/corpus.json" --max-kb 1024
for m in $models; do
  "${pin[@]}" "$bench" --model "$cache/$m" --runs "$runs" "$work/corpus.json" >"$work/$m.c.json"
  "${pin[@]}" node "$root/bench/tokenizer_hf_js_bench.js" "$cache/tokenizers-js/main.js" "$cache/$m" \
    "$work/corpus.json" "$runs" >"$work/$m.js.json"
done

"$py" "$root/bench/tok_bench_report.py" "$work" $models
