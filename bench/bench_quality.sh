#!/usr/bin/env bash
# What FlexGen's 4-bit group-wise compression, and the same weights as GGUF
# files in ggml's Q8_0 and Q4_0, cost in quality, on a real
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
common=(--tokenizer "$m/tok512.bin" --temperature 0 --ignore-eos --offload-dir "$work/off")
# The same weights as GGUF files in ggml's Q8_0 and Q4_0 (gguf-py's
# quantize; the FFN's down projection, rows of 172, is not whole 32-value
# blocks and stays F16, as llama.cpp's quantizer leaves such a matrix)
gguf_py=$("$root/scripts/fetch-gguf-py.sh")
/usr/bin/python3 "$root/tests/ref/llama2c_ref.py" convert "$m/stories260K.bin" "$work/hf"
for q in Q8_0 Q4_0; do
  /usr/bin/python3 "$root/tests/ref/gguf_quant.py" --model "$work/hf" --mix $q --out "$work/$q.gguf" \
    --ref-dir "$work/ref-$q" --gguf-py "$gguf_py" >/dev/null
done
"$flexgen" tokenize --tokenizer "$m/tok512.bin" --prompts "$prompts" --gen-len "$gen" \
  | /usr/bin/python3 -c 'import json, sys; print(json.dumps([json.loads(l) for l in sys.stdin]))' >"$work/p.json"
bin=(--model "$m/stories260K.bin")
modes=("none|${bin[*]}" "weights|${bin[*]} --compress-weight" "cache|${bin[*]} --compress-cache"
       "both|${bin[*]} --compress-weight --compress-cache" "q8_0|--model $work/Q8_0.gguf" "q4_0|--model $work/Q4_0.gguf")
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
                    ("both", "both"), ("q8_0", "GGUF Q8_0"), ("q4_0", "GGUF Q4_0")):
    run = [json.loads(l)["output_ids"] for l in open(w + "/%s.jsonl" % name)]
    first = [next((t for t in range(len(b)) if r[t] != b[t]), len(b)) for r, b in zip(run, base)]
    d = np.abs(logp(name) - lp0)
    free = log_softmax(np.load(w + "/%s.npy" % name))
    dd = [abs(free[i, t, base[i][t]] - free0[i, t, base[i][t]]) for i in range(len(base))
          for t in range(1, min(first[i] + 1, gen))]
    print("| %s | %.1f | %d of %d | %.4f | %.3f | %.4f (%d) |" % (label, np.mean(first), sum(f == gen for f in first),
                                                              len(base), d.mean(), d.max(), np.mean(dd), len(dd)))
PY
