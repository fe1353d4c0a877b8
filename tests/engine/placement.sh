#!/usr/bin/env bash
# Placement invariance: with a fixed --gpu-batch-size, the offloading engine's
# tokens and dumped logits are bitwise identical across policies (weights,
# cache, activations on GPU, CPU or disk, mixed percentages,
# CPU attention, 1 to 4 GPU batches per block, the row schedule, overlap on
# and off) and bitwise
# equal to the reference
# engine's: every process rounds at the same points (docs/ARCHITECTURE.md, "Numerics"), and the
# reference engine is itself checked against the numpy oracle (tests/model).
# Usage: placement.sh FLEXGEN WORKDIR [MAKE_CHECKPOINT ARGS]
# FG_PLACEMENT_FAMILY=llama: the checkpoint is make_llama_checkpoint.py's
# (the same policies over a Llama-family model: a cache of kv heads only,
# rotary, a gated MLP). FG_PLACEMENT_EXPERTS=1 (a mixture of experts): also
# experts placed apart from their layer's dense part (--percent-experts),
# loaded as routed (the default) or all with the layer.
set -uo pipefail
flexgen=$1 work=$2
ckpt=${3:-"--layers 3 --hidden 64 --heads 4 --ffn 160 --vocab 500 --max-pos 96 --seed 21"}
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
maker=make_checkpoint.py
[ "${FG_PLACEMENT_FAMILY:-opt}" = llama ] && maker=make_llama_checkpoint.py
rm -rf "$work" && mkdir -p "$work"
# shellcheck disable=SC2086
"$py" "$ref/$maker" --out "$work/m" $ckpt >/dev/null || exit 1
# 11 prompts of lengths 2..12: partial last block, every batch left-padded
"$py" -c 'import json, random; r = random.Random(3)
print(json.dumps([[2] + [r.randrange(4, 500) for _ in range(1 + (7 * i) % 11)] for i in range(11)]))' >"$work/p.json"
gbs=3 gen=5
common=(--model "$work/m" --prompt-ids "$work/p.json" --gen-len $gen --ignore-eos --gpu-batch-size $gbs
        --offload-dir "$work/offload")
"$flexgen" run --engine reference "${common[@]}" --out "$work/ref.jsonl" --dump-logits "$work/ref.npy" 2>/dev/null \
  || { echo "reference run failed"; exit 1; }
policies=(
  "all-gpu|--percent 100 0 100 0 100 0"
  "all-cpu|--percent 0 100 0 100 0 100"
  "weights-mixed|--percent 30 70 100 0 100 0"
  "cache-cpu|--percent 100 0 0 100 100 0"
  "cache-mixed|--percent 100 0 50 50 100 0"
  "act-cpu|--percent 100 0 100 0 0 100"
  "cpu-attention|--percent 50 50 0 100 0 100 --cpu-cache-compute"
  "2-batches|--percent 0 100 0 100 100 0 --num-gpu-batches 2"
  "4-batches-cpu-attention|--percent 60 40 30 70 100 0 --num-gpu-batches 4 --cpu-cache-compute"
  "row-schedule-3-batches|--percent 20 80 0 100 0 100 --num-gpu-batches 3 --schedule row"
  "default-rule|--policy default"
  "no-overlap-mixed|--percent 30 70 50 50 0 100 --num-gpu-batches 2 --no-overlap"
  "overlap-row-cpu-attention|--percent 0 100 0 100 0 100 --num-gpu-batches 2 --schedule row --cpu-cache-compute"
  "weights-on-disk|--percent 0 0 100 0 100 0 --num-gpu-batches 2"
  "weights-3-tiers|--percent 30 30 0 100 0 100 --num-gpu-batches 3 --cpu-cache-compute"
  "weights-disk-row-no-overlap|--percent 0 50 50 50 100 0 --schedule row --no-overlap"
  "cache-on-disk|--percent 100 0 0 0 100 0 --num-gpu-batches 2"
  "activations-on-disk|--percent 100 0 100 0 0 0 --num-gpu-batches 3"
  "all-on-disk|--percent 0 0 0 0 0 0 --num-gpu-batches 2"
  "three-tiers-everything|--percent 30 30 30 30 0 0 --num-gpu-batches 4 --cpu-cache-compute"
)
if [ "${FG_PLACEMENT_EXPERTS:-0}" = 1 ]; then
  policies+=(
    "experts-disk-dense-gpu|--percent 100 0 100 0 100 0 --percent-experts 0 0 --num-gpu-batches 2"
    "experts-gpu-dense-disk|--percent 0 0 100 0 100 0 --percent-experts 100 0"
    "experts-3-tiers|--percent 50 50 0 100 0 100 --percent-experts 30 30 --num-gpu-batches 3"
    "experts-3-tiers-load-all|--percent 50 50 0 100 0 100 --percent-experts 30 30 --num-gpu-batches 3 --expert-load all"
    "experts-cpu-attention|--percent 100 0 0 100 100 0 --percent-experts 20 40 --num-gpu-batches 2 --cpu-cache-compute"
    "experts-row-schedule|--percent 30 70 100 0 100 0 --percent-experts 0 50 --num-gpu-batches 2 --schedule row"
    "experts-no-overlap-disk|--percent 0 100 0 100 0 100 --percent-experts 40 0 --no-overlap"
    "experts-all-on-disk-load-all|--percent 0 0 0 0 0 0 --expert-load all --num-gpu-batches 2"
    "experts-act-disk-3-tiers|--percent 100 0 30 30 0 0 --percent-experts 25 25 --num-gpu-batches 4 --cpu-cache-compute"
    "cpu-experts|--percent 100 0 100 0 100 0 --percent-experts 0 100 --cpu-expert-compute"
    "cpu-experts-3-tiers-routed|--percent 50 50 0 100 0 100 --percent-experts 30 40 --cpu-expert-compute --num-gpu-batches 3"
    "cpu-experts-load-all-cpu-attention|--percent 0 100 0 100 100 0 --percent-experts 20 50 --cpu-expert-compute --expert-load all --num-gpu-batches 2 --cpu-cache-compute"
    "cpu-experts-row-disk|--percent 0 0 0 0 0 0 --percent-experts 0 60 --cpu-expert-compute --schedule row --num-gpu-batches 2"
  )
fi
fails=0
for p in "${policies[@]}"; do
  name=${p%%|*} args=${p#*|}
  # shellcheck disable=SC2086
  if ! "$flexgen" run --engine flexgen "${common[@]}" $args --out "$work/$name.jsonl" --dump-logits "$work/$name.npy" \
      2>"$work/$name.err"; then
    echo "FAIL $name: run failed: $(grep error: "$work/$name.err")"; fails=$((fails + 1)); continue
  fi
  if ! cmp -s "$work/ref.npy" "$work/$name.npy"; then
    echo "FAIL $name: logits differ from the reference engine"; fails=$((fails + 1)); continue
  fi
  if ! diff -q <(grep -o '"output_ids":\[[0-9,]*\]' "$work/ref.jsonl") \
                <(grep -o '"output_ids":\[[0-9,]*\]' "$work/$name.jsonl") >/dev/null; then
    echo "FAIL $name: tokens differ"; fails=$((fails + 1)); continue
  fi
  echo "ok   $name: tokens and logits bitwise equal to the reference"
done
# everything on disk, with a relative --offload-dir (every process must
# resolve it against the coordinator's working directory)
rel=(--model m --prompt-ids p.json --gen-len $gen --ignore-eos --gpu-batch-size $gbs --offload-dir rel-offload)
if (cd "$work" && "$flexgen" run "${rel[@]}" --percent 0 0 0 0 0 0 --num-gpu-batches 2 --out rel.jsonl \
      --dump-logits rel.npy 2>rel.err) && cmp -s "$work/ref.npy" "$work/rel.npy"; then
  echo "ok   relative-offload-dir: logits bitwise equal to the reference"
else
  echo "FAIL relative-offload-dir: $(grep error: "$work/rel.err")"; fails=$((fails + 1))
fi
# sampling with temperature and top-p (on the gpu worker, each sequence's
# generator there): the same tokens and logits as the reference engine's
samp=(--temperature 0.8 --top-p 0.9 --seed 7)
"$flexgen" run --engine reference "${common[@]}" "${samp[@]}" --out "$work/sref.jsonl" \
  --dump-logits "$work/sref.npy" 2>/dev/null || { echo "sampled reference run failed"; exit 1; }
if "$flexgen" run --engine flexgen "${common[@]}" "${samp[@]}" --percent 30 30 0 100 0 100 --num-gpu-batches 3 \
      --cpu-cache-compute --out "$work/samp.jsonl" --dump-logits "$work/samp.npy" 2>"$work/samp.err" &&
   cmp -s "$work/sref.npy" "$work/samp.npy" &&
   diff -q <(grep -o '"output_ids":\[[0-9,]*\]' "$work/sref.jsonl") \
           <(grep -o '"output_ids":\[[0-9,]*\]' "$work/samp.jsonl") >/dev/null &&
   ! cmp -s "$work/ref.npy" "$work/sref.npy"; then
  echo "ok   sampled: temperature 0.8, top-p 0.9: tokens and logits bitwise equal to the reference"
else
  echo "FAIL sampled: $(grep error: "$work/samp.err")"; fails=$((fails + 1))
fi
# a policy over the GPU budget is refused before any work, with the numbers
"$flexgen" run --engine flexgen "${common[@]}" --percent 100 0 100 0 100 0 --gpu-mem 64K --out "$work/b.jsonl" \
  2>"$work/b.err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "GPU memory.*--gpu-mem is" "$work/b.err" || [ -e "$work/b.jsonl" ]; then
  echo "FAIL over-budget: exit $rc: $(cat "$work/b.err")"; fails=$((fails + 1))
else
  echo "ok   over-budget: $(grep error: "$work/b.err" | cut -c1-160)"
fi
echo "placement: $(( ${#policies[@]} + 3 - fails )) passed, $fails failed"
[ $fails -eq 0 ] && rm -rf "$work"
[ $fails -eq 0 ]
