#!/usr/bin/env bash
# A Batch API file's requests grouped (by max_tokens, then prompt length:
# --batch-order grouped, the default) against run in file order
# (--batch-order input): a mixed file of 400 requests (make_batch.py:
# max_tokens 1..64, chat and completions, greedy and sampled) on a random
# OPT-shaped checkpoint, GPU batches of 8 one per block (a block then ends
# with its longest request), runs interleaved, REPS each. Prints per order
# the median throughput in answered tokens (completion tokens / (prefill +
# decode)), the row-steps computed (rows x tokens each block ran, from the
# report's generated_tokens) and how many of them were spent on rows that
# had already finished (computed - answered), and the grouped / input ratio.
# Not a test: figures vary with the machine's load.
# Usage: bench/bench_batch.sh [REPS (default 3)] [REQUESTS (default 400)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
flexgen=$root/build/bin/flexgen
py=/usr/bin/python3
reps=${1:-3} n=${2:-400}
work=$(mktemp -d /var/tmp/flexgen-batch.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$py" "$root/tests/ref/make_checkpoint.py" --out "$work/m" --layers 4 --hidden 256 --heads 4 --ffn 1024 --vocab 600 \
  --max-pos 256 --seed 5 --std 0.6 --synth-vocab >/dev/null
printf '{%% for m in messages %%}<|{{ m.role }}|>{{ m.content }}\n{%% endfor %%}<|assistant|>' >"$work/chat.jinja"
"$py" "$root/tests/batch/make_batch.py" "$work/b.jsonl" "$n" --max-pos 256 --seed 3 2>/dev/null
for rep in $(seq "$reps"); do
  for order in grouped input; do
    "$flexgen" run --model "$work/m" --prompts "$work/b.jsonl" --chat-template "$work/chat.jinja" --device host \
      --gpu-batch-size 8 --num-gpu-batches 1 --percent 100 0 100 0 100 0 --batch-order "$order" \
      --offload-dir "$work/off" --out "$work/$order.$rep.jsonl" --report "$work/$order.$rep.report.json" 2>/dev/null
  done
done
"$py" - "$work" "$reps" <<'PY'
import json, statistics, sys
work, reps = sys.argv[1], int(sys.argv[2])
res = {}
for order in ["grouped", "input"]:
    tput, computed, answered = [], None, None
    for rep in range(1, reps + 1):
        rep_ = json.load(open(f"{work}/{order}.{rep}.report.json"))
        out = [json.loads(l) for l in open(f"{work}/{order}.{rep}.jsonl")]
        answered = sum(o["response"]["body"]["usage"]["completion_tokens"] for o in out if o["response"])
        computed = rep_["generated_tokens"]
        tput.append(answered / (rep_["prefill_s"] + rep_["decode_s"]))
    res[order] = statistics.median(tput)
    print(f"{order:8s} median {res[order]:8.1f} answered tokens/s (runs: {', '.join(f'{t:.1f}' for t in tput)}); "
          f"row-steps computed {computed}, answered {answered}, on finished rows {computed - answered} "
          f"({100 * (computed - answered) / computed:.1f}%)")
print(f"grouped / input throughput: {res['grouped'] / res['input']:.2f}x (median of {reps})")
PY
