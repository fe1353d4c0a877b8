#!/usr/bin/env bash
# The same weights stored as single safetensors (F16 and F32), sharded
# safetensors, a FlexGen numpy directory and hub-style names (no "model."
# prefix) must give bitwise identical logits: every loader ends in the same
# fp16 values.
# Usage: formats.sh FLEXGEN WORKDIR
set -euo pipefail
flexgen=$1 work=$2
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
base="--layers 2 --hidden 64 --heads 4 --ffn 256 --vocab 1000 --max-pos 128 --seed 7"
echo '[[2, 10, 20, 30], [2, 7, 8]]' > "$work/p.json"
variants=("safetensors:--format safetensors" "sharded:--format sharded --shards 3"
          "npy:--format npy" "f32:--format safetensors --dtype f32" "hub:--format safetensors --hub-names")
for v in "${variants[@]}"; do
  name=${v%%:*} args=${v#*:}
  # shellcheck disable=SC2086
  "$py" "$ref/make_checkpoint.py" --out "$work/$name" $base $args >/dev/null
  "$flexgen" run --engine reference --model "$work/$name" --prompt-ids "$work/p.json" --gen-len 6 \
    --ignore-eos --out "$work/$name.jsonl" --dump-logits "$work/$name.npy" 2>/dev/null
done
# a FlexGen numpy dir without config.json is named like opt-125m-np: covered by --dummy shapes elsewhere
"$py" - "$work" safetensors sharded npy f32 hub <<'PY'
import sys, numpy as np, json
work, names = sys.argv[1], sys.argv[2:]
base = np.load(f"{work}/{names[0]}.npy")
toks = [json.loads(l)["output_ids"] for l in open(f"{work}/{names[0]}.jsonl")]
for n in names[1:]:
    other = np.load(f"{work}/{n}.npy")
    assert other.shape == base.shape, (n, other.shape)
    if not np.array_equal(other.view(np.uint32), base.view(np.uint32)):
        d = np.abs(other - base).max()
        sys.exit(f"formats: {n} differs from {names[0]}: max |diff| {d}")
    t = [json.loads(l)["output_ids"] for l in open(f"{work}/{n}.jsonl")]
    assert t == toks, f"formats: {n} tokens differ"
print(f"formats: {', '.join(names)}: logits bitwise identical ({base.size} values)")
PY
rm -rf "$work"
