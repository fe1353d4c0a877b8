#!/usr/bin/env bash
# What 4-bit compression costs in accuracy (issue 14, must-show 2): the
# reference engine's logits with --compress-weight, --compress-cache and both
# against its uncompressed logits, over 16 prompts x 32 generated tokens:
# mean and max |logit difference|, greedy-token agreement (the share of the
# 16 x 32 generated tokens equal to the uncompressed run's; a token after a
# first divergence sees another context) and first-token agreement. Two
# models: the OPT-125M shape (--dummy opt-125m) and a small checkpoint in
# Hugging Face's safetensors format (tests/ref/make_checkpoint.py; 4 layers,
# hidden 256, std 0.02). Both are random weights: their logits are nearly
# flat, so greedy agreement is a pessimistic figure (near-ties flip).
# Usage: bench/bench_compress_accuracy.sh   (build first; a few minutes)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
flexgen=$root/build/bin/flexgen py=${FG_PYTHON:-/usr/bin/python3}
work=$(mktemp -d /var/tmp/flexgen-q4acc.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$py" "$root/tests/ref/make_checkpoint.py" --out "$work/small" --layers 4 --hidden 256 --heads 4 --ffn 1024 \
  --vocab 8000 --max-pos 256 --seed 14 --std 0.02 >/dev/null
for model in "opt-125m|--dummy opt-125m|50000" "small-safetensors|--model $work/small|8000"; do
  name=${model%%|*} rest=${model#*|} src=${rest%|*} vocab=${model##*|}
  "$py" -c "import json, random, sys; r = random.Random(14)
print(json.dumps([[2] + [r.randrange(4, $vocab) for _ in range(7 + 3 * i)] for i in range(16)]))" >"$work/p.json"
  for flags in "" "--compress-weight" "--compress-cache" "--compress-weight --compress-cache"; do
    tag=$(echo "none$flags" | tr -d ' -')
    # shellcheck disable=SC2086
    "$flexgen" run --engine reference $src --prompt-ids "$work/p.json" --gen-len 32 --ignore-eos \
      --gpu-batch-size 16 $flags --out "$work/$name-$tag.jsonl" --dump-logits "$work/$name-$tag.npy" 2>/dev/null
  done
  "$py" - "$work" "$name" <<'PY'
import json, sys
import numpy as np
w, name = sys.argv[1], sys.argv[2]
def load(tag):
    ids = [json.loads(l)["output_ids"] for l in open("%s/%s-%s.jsonl" % (w, name, tag))]
    return np.load("%s/%s-%s.npy" % (w, name, tag)), np.array(ids)
base, bids = load("none")
top2 = np.sort(base, axis=-1)[..., -2:]
print("%s: 16 prompts x 32 tokens, against the uncompressed logits (|logit| mean %.3f, std over the "
      "vocabulary %.3f, median top-1 minus top-2 margin %.3f)"
      % (name, float(np.abs(base).mean()), float(base.std(axis=-1).mean()), float(np.median(top2[..., 1] - top2[..., 0]))))
print("  %-26s %12s %12s %14s %14s" % ("flags", "mean |diff|", "max |diff|", "token agree", "first token"))
for tag, label in (("nonecompressweight", "--compress-weight"), ("nonecompresscache", "--compress-cache"),
                   ("nonecompressweightcompresscache", "both")):
    lg, ids = load(tag)
    d = np.abs(lg - base)
    print("  %-26s %12.4g %12.4g %13.1f%% %13.1f%%" % (label, d.mean(), d.max(), 100 * (ids == bids).mean(),
                                                       100 * (ids[:, 0] == bids[:, 0]).mean()))
PY
done
