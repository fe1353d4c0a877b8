#!/usr/bin/env bash
# What FlexGen's 4-bit group-wise compression costs in quality, on a real
# trained model (models/stories260K), against the uncompressed run on the
# same 16 prompts (tests/model/stories_prompts.txt), greedy, 200 tokens:
#   * tokens before the first divergence from the uncompressed run's tokens
#     (mean over the prompts; 200 = never diverged);
#   * teacher forcing: the uncompressed run's chosen tokens scored under each
#     setting (every prefix prompt + tokens[:t] as one prompt of a single
#     run, gen-len 1, its logits dumped): mean and max |delta log p| of the
#     chosen token against the uncompressed model's log p at the same place,
#     and the mean log p itself (the model's own confidence, for scale).
#     A prefill attends to the keys and values it has just computed, not to
#     the cache read back, so this shows nothing of --compress-cache; hence
#   * decode-forced: the same |delta log p| over the decode steps of the
#     free-running runs up to and including each prompt's first divergence
#     (until there both runs were fed the same tokens), which reads the
#     compressed cache back at every step.
# Usage: bench/bench_quality.sh [GEN_LEN]   (build first: scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
flexgen="$root/build/bin/flexgen" m="$root/models/stories260K" prompts="$root/tests/model/stories_prompts.txt"
gen=${1:-200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--model "$m/stories260K.bin" --tokenizer "$m/tok512.bin" --temperature 0 --ignore-eos --offload-dir "$work/off")
"$flexgen" tokenize --tokenizer "$m/tok512.bin" --prompts "$prompts" --gen-len "$gen" \
  | /usr/bin/python3 -c 'import json, sys; print(json.dumps([json.loads(l) for l in sys.stdin]))' >"$work/p.json"
modes=("none|" "weights|--compress-weight" "cache|--compress-cache" "both|--compress-weight --compress-cache")
for mo in "${modes[@]}"; do
  name=${mo%%|*} flags=${mo#*|}
  # shellcheck disable=SC2086
  "$flexgen" run "${common[@]}" $flags --prompt-ids "$work/p.json" --gen-len "$gen" --out "$work/$name.jsonl" \
    --dump-logits "$work/$name.npy" 2>/dev/null
done
/usr/bin/python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
p = json.load(open(w + "/p.json"))
base = [json.loads(l)["output_ids"] for l in open(w + "/none.jsonl")]
json.dump([p[i] + base[i][:t] for i in range(len(p)) for t in range(len(base[i]))], open(w + "/tf.json", "w"))
PY
for mo in "${modes[@]}"; do
  name=${mo%%|*} flags=${mo#*|}
  # shellcheck disable=SC2086
  "$flexgen" run "${common[@]}" $flags --prompt-ids "$work/tf.json" --gen-len 1 --gpu-batch-size 64 \
    --out "$work/tf-$name.jsonl" --dump-logits "$work/tf-$name.npy" 2>/dev/null
done
/usr/bin/python3 - "$work" "$gen" <<'PY'
import json, sys
import numpy as np
w, gen = sys.argv[1], int(sys.argv[2])
base = [json.loads(l)["output_ids"] for l in open(w + "/none.jsonl")]
chosen = np.array([t for b in base for t in b])

def log_softmax(x):
    x = x.astype(np.float64)
    x -= x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def logp(name):
    lp = log_softmax(np.load(w + "/tf-%s.npy" % name)[:, 0, :])
    return lp[np.arange(len(chosen)), chosen]


free0 = log_softmax(np.load(w + "/none.npy"))

lp0 = logp("none")
print("stories260K, %d prompts x %d tokens, greedy; uncompressed mean log p of its own tokens %.4f"
      % (len(base), gen, lp0.mean()))
print("| compressed | tokens before first divergence (mean) | prompts never diverging | teacher-forced mean abs dlogp "
      "| teacher-forced max | decode-forced mean abs dlogp (steps) |")
print("| --- | --- | --- | --- | --- | --- |")
for name, label in (("none", "none (baseline)"), ("weights", "--compress-weight"), ("cache", "--compress-cache"),
                    ("both", "both")):
    run = [json.loads(l)["output_ids"] for l in open(w + "/%s.jsonl" % name)]
    first = [next((t for t in range(len(b)) if r[t] != b[t]), len(b)) for r, b in zip(run, base)]
    d = np.abs(logp(name) - lp0)
    free = log_softmax(np.load(w + "/%s.npy" % name))
    dd = [abs(free[i, t, base[i][t]] - free0[i, t, base[i][t]]) for i in range(len(base))
          for t in range(1, min(first[i] + 1, gen))]
    print("| %s | %.1f | %d of %d | %.4f | %.3f | %.4f (%d) |" % (label, np.mean(first), sum(f == gen for f in first),
                                                              len(base), d.mean(), d.max(), np.mean(dd), len(dd)))
PY
