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

"$py" - "$work" $models <<'PY'
import json, sys
work, models = sys.argv[1], sys.argv[2:]
for m in models:
    c = json.load(open(f"{work}/{m}.c.json"))
    js = json.load(open(f"{work}/{m}.js.json"))
    assert c["tokens"] == js["tokens"], f"{m}: token counts differ: C {c['tokens']}, JS {js['tokens']}"
    cm, nm, jm = c["cache_median_mbps"], c["nocache_median_mbps"], js["median_mbps"]
    print(f"{m}: {c['docs']} documents, {c['bytes'] / 1e6:.2f} MB, {c['tokens']} tokens; {c['runs']} runs each on "
          f"one core (PCRE2 JIT: {c['jit']}, node {js['node']}); load: C {c['load_s']:.2f} s, JS {js['load_s']:.2f} s")
    print(f"  C, word cache on    {cm:8.2f} MB/s  median of {c['cache_mbps']}")
    print(f"  C, word cache off   {nm:8.2f} MB/s  median of {c['nocache_mbps']}")
    print(f"  JavaScript          {jm:8.2f} MB/s  median of {js['mbps']}")
    print(f"  ratios: C / JS {cm / jm:.1f}x (cache off: {nm / jm:.1f}x)")
PY
