#!/usr/bin/env bash
# Reference engine vs the numpy oracle on the same case, same run:
# --dummy opt-125m shapes, batch 16, prompt 128, 32 new tokens (FlexGen's
# throughput: generated tokens / (prefill + decode)). Runs each side REPS
# times, alternating, and prints medians, the share of time in BLAS, and the
# ratio. Usage: bench/bench_reference.sh [REPS]   (build first: scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-3}
py=/usr/bin/python3
flexgen=$root/build/bin/flexgen
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" -c '
import json, random
r = random.Random(0)
print(json.dumps([[2] + [r.randrange(4, 50000) for _ in range(127)] for _ in range(16)]))' >"$work/prompts.json"
echo "case: opt-125m shapes, batch 16, prompt 128, gen 32; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $(nproc) cores"
for i in $(seq "$reps"); do
  "$flexgen" run --engine reference --dummy opt-125m --prompt-ids "$work/prompts.json" --gen-len 32 \
    --ignore-eos --out "$work/out.jsonl" --report "$work/c$i.json" 2>/dev/null
  "$py" "$root/bench/ref_numpy.py" --batch 16 --prompt-len 128 --gen-len 32 >"$work/n$i.json"
done
"$py" - "$work" "$reps" <<'PY'
import json, statistics as st, sys
work, reps = sys.argv[1], int(sys.argv[2])
c = [json.load(open(f"{work}/c{i}.json")) for i in range(1, reps + 1)]
n = [json.loads(open(f"{work}/n{i}.json").read().strip().splitlines()[-1]) for i in range(1, reps + 1)]
med = lambda xs: st.median(xs)
ct, nt = med([x["throughput_tokens_per_s"] for x in c]), med([x["tokens_per_s"] for x in n])
print(f"flexgen reference: {ct:7.2f} tokens/s  (prefill {med([x['prefill_s'] for x in c]):.2f} s, "
      f"decode {med([x['decode_s'] for x in c]):.2f} s, BLAS {100 * med([x['gemm_share'] for x in c]):.0f}% "
      f"of the time, the rest {100 - 100 * med([x['gemm_share'] for x in c]):.0f}%)")
print(f"numpy oracle:      {nt:7.2f} tokens/s  (prefill {med([x['prefill_s'] for x in n]):.2f} s, "
      f"decode {med([x['decode_s'] for x in n]):.2f} s)")
print(f"ratio flexgen/numpy: {ct / nt:.2f}x  (medians of {reps}; target >= 1.3x)")
PY
