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

"$py" - "$work" <<'PY'
import json, sys
ok = True
for name in ("mixed", "prose"):
    c = json.load(open(f"{sys.argv[1]}/{name}.c.json"))
    js = json.load(open(f"{sys.argv[1]}/{name}.js.json"))
    assert c["tokens"] == js["tokens"], f"{name}: token counts differ: C {c['tokens']}, JS {js['tokens']}"
    cm, nm, jm = c["cache_median_mbps"], c["nocache_median_mbps"], js["median_mbps"]
    print(f"{name}: {c['docs']} documents, {c['bytes'] / 1e6:.2f} MB, {c['tokens']} tokens; "
          f"{c['runs']} runs each on one core (PCRE2 JIT: {c['jit']}, node {js['node']})")
    print(f"  C, word cache on    {cm:8.2f} MB/s  median of {c['cache_mbps']}")
    print(f"  C, word cache off   {nm:8.2f} MB/s  median of {c['nocache_mbps']}")
    print(f"  JavaScript encoder  {jm:8.2f} MB/s  median of {js['mbps']}")
    print(f"  ratios: C cache / JS {cm / jm:.1f}x, C no cache / JS {nm / jm:.1f}x, "
          f"cache / no cache {cm / nm:.2f}x")
    ok = ok and min(cm, nm) >= 5 and min(cm, nm) > jm
print(f"target (>= 5 MB/s and faster than JS, cache on and off): {'met' if ok else 'NOT met'}")
sys.exit(0 if ok else 1)
PY
