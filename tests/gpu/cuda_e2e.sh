#!/usr/bin/env bash
# End to end on a GPU: `flexgen run --device cuda` gives the host backend's
# tokens (up to near-ties) for a small model over several placements:
# everything on the GPU, weights split GPU/CPU, weights on disk, cache and
# activations on the CPU, CPU attention (--cpu-cache-compute), and 2 GPU
# batches per block. The reference is `--device host` (itself bitwise equal
# to the reference engine, tests/engine/placement.sh); tests/ref/compare.py
# judges tokens and logits. Also: cuda runs whose attention stays on the GPU
# give the same bits whatever the placement (cuBLAS is deterministic for a
# shape on one GPU, the kernels use no atomics in their sums).
# Exits 77 where no CUDA device can be opened.
# Usage: cuda_e2e.sh FLEXGEN PROBE WORKDIR [MAKE_LLAMA_CHECKPOINT ARGS [--gguf-q4km | --experts |
#                                                                       --compress-cache]]
#   (PROBE: backend_ops_check --probe; with checkpoint arguments the model is
#   a Llama-family one of make_llama_checkpoint.py, same tolerances: its
#   kernels add roundings of the same size, an RMSNorm's and SwiGLU's inputs;
#   with --gguf-q4km that model's shapes as a GGUF file of random Q4_K and
#   Q6_K blocks (make_gguf_q4km.py), whose Linears the cuda backend computes
#   on the blocks: the dequantizing GEMV at decode (exact weights), fp16
#   tiles and cuBLAS at prefill (each weight rounded once more, 2^-11
#   relative: a rounding of the size the tolerance already allows per GEMM);
#   with --experts the model is a mixture of experts and the experts get
#   placements of their own: on the CPU or disk beside a dense part on the
#   GPU, over three tiers, loaded as routed (MOE_ROUTE, then the MLP) and
#   all at once, with CPU attention); with --compress-cache both sides
#   keep a 4-bit KV cache, the cuda backend's written by its own kernels)
#
# Tolerance: the cuda backend rounds to fp16 where the host keeps fp32
# between GEMMs (docs/ARCHITECTURE.md, "The cuda backend"), about 3e-4 RMS
# relative per rounding; on this model (hidden 64, 3 layers, logits std
# ~0.8) that puts the logits within ~3e-3 of the host's, so atol 2e-2 holds
# with margin, and a token may differ only where the host's own top-2 gap
# is under tie-tol 4e-2 (compare.py stops comparing that prompt there).
# With experts, routing is a discontinuity: the cuda backend's router reads
# the host's fp32 normalised x of its own h, and its h differs from the
# host's as the logits do (up to ~3e-3 here), so a router logit may differ
# by as much; where the numpy oracle's k-th and (k+1)-th router logits of a
# prompt come within route-tol 1e-2 (3x that), another expert may be
# chosen and compare.py accepts a divergence there, comparing that prompt no
# further, as long as 3/4 of all steps are still compared.
# With a 4-bit cache, a key or value that differs by an fp16 rounding may
# be stored one 4-bit step (its group's range / 15) away: the engine and
# the numpy oracle, apart only by summation order, already need atol 3e-2
# there (tests/model, oracle_q4_weights_cache); the cuda backend's extra
# roundings flip a few times more codes (about 0.25% of them where half the
# values are an ulp off), so atol 6e-2 and tie-tol 1.2e-1: estimates, not
# measured on a GPU.
set -uo pipefail
flexgen=$1 probe=$2 work=$3 llama=${4:-} mode=${5:-}
"$probe" --probe || exit 77
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
if [ -n "$llama" ]; then
  # shellcheck disable=SC2086
  "$py" "$ref/make_llama_checkpoint.py" --out "$work/m" $llama >/dev/null || exit 1
  if [ "$mode" = --gguf-q4km ]; then
    "$py" "$(dirname "$0")/make_gguf_q4km.py" --model "$work/m" --out "$work/m.gguf" --seed 3 >/dev/null || exit 1
    model=$work/m.gguf
  fi
else
  "$py" "$ref/make_checkpoint.py" --out "$work/m" --layers 3 --hidden 64 --heads 4 --ffn 160 --vocab 500 --max-pos 96 \
    --seed 21 >/dev/null || exit 1
fi
"$py" -c 'import json, random; r = random.Random(5)
print(json.dumps([[2] + [r.randrange(4, 500) for _ in range(1 + (5 * i) % 11)] for i in range(8)]))' >"$work/p.json"
common=(--model "${model:-$work/m}" --prompt-ids "$work/p.json" --gen-len 8 --ignore-eos --gpu-batch-size 4
        --offload-dir "$work/offload")
tol=(--atol 2e-2 --tie-tol 4e-2)
if [ "$mode" = --compress-cache ]; then common+=(--compress-cache); tol=(--atol 6e-2 --tie-tol 1.2e-1); fi
"$flexgen" run --device host "${common[@]}" --percent 100 0 100 0 100 0 --out "$work/host.jsonl" \
  --dump-logits "$work/host.npy" 2>"$work/host.err" || { echo "host run failed: $(grep error: "$work/host.err")"; exit 1; }
"$py" -c 'import json, sys
print(json.dumps({"tokens": [json.loads(l)["output_ids"] for l in open(sys.argv[1]) if l.strip()]}))' \
  "$work/host.jsonl" >"$work/host.json"
route=()
if [ "$mode" = --experts ]; then
  # the routes' near-ties, per prompt and step, from the numpy oracle (its
  # tokens are the host's up to greedy near-ties: engine_placement_llama_*)
  "$py" "$ref/llama_ref.py" --model "$work/m" --prompt-ids "$work/p.json" --gen-len 8 \
    --out-logits "$work/oracle.npy" --out-tokens "$work/oracle.json" >/dev/null || { echo "oracle failed"; exit 1; }
  "$py" -c 'import json, sys
h, o = (json.load(open(f)) for f in sys.argv[1:3])
h["route_gaps"] = o["route_gaps"]
json.dump(h, open(sys.argv[1], "w"))' "$work/host.json" "$work/oracle.json" || exit 1
  route=(--route-tol 1e-2)
fi
policies=(
  "all-gpu|--percent 100 0 100 0 100 0"
  "weights-gpu-cpu|--percent 40 60 100 0 100 0"
  "weights-on-disk|--percent 0 0 100 0 100 0"
  "cache-act-cpu|--percent 100 0 0 100 0 100"
  "cpu-attention|--percent 50 50 0 100 0 100 --cpu-cache-compute"
  "2-batches|--percent 0 100 0 100 100 0 --num-gpu-batches 2"
)
# the experts apart from their layer's dense part (tests/engine/placement.sh's)
[ "$mode" = --experts ] && policies+=(
  "experts-cpu-routed|--percent 100 0 100 0 100 0 --percent-experts 0 100"
  "experts-disk-load-all|--percent 100 0 100 0 100 0 --percent-experts 0 0 --expert-load all --num-gpu-batches 2"
  "experts-3-tiers|--percent 50 50 100 0 100 0 --percent-experts 30 30 --num-gpu-batches 2"
  "experts-cpu-attention|--percent 100 0 0 100 100 0 --percent-experts 20 40 --cpu-cache-compute"
  "experts-cpu-compute|--percent 100 0 100 0 100 0 --percent-experts 20 60 --cpu-expert-compute --num-gpu-batches 2"
)
fails=0
for p in "${policies[@]}"; do
  name=${p%%|*} args=${p#*|}
  # shellcheck disable=SC2086
  if ! "$flexgen" run --device cuda "${common[@]}" $args --out "$work/$name.jsonl" --dump-logits "$work/$name.npy" \
      2>"$work/$name.err"; then
    echo "FAIL $name: run failed: $(grep error: "$work/$name.err")"; fails=$((fails + 1)); continue
  fi
  if ! grep -q "cuda backend" "$work/$name.err"; then
    echo "FAIL $name: the log does not name the cuda backend"; fails=$((fails + 1)); continue
  fi
  if ! out=$("$py" "$ref/compare.py" --ref-logits "$work/host.npy" --ref-tokens "$work/host.json" \
      --jsonl "$work/$name.jsonl" --logits "$work/$name.npy" ${tol[@]} ${route[@]+"${route[@]}"} 2>&1); then
    echo "FAIL $name: cuda vs host: $out"; fails=$((fails + 1)); continue
  fi
  echo "ok   $name: $(echo "$out" | head -1)"
done
# (attention on the GPU: every placement runs the same kernels on the same
# shapes; the experts' GEMMs too, whichever tier their bytes came from)
for name in weights-gpu-cpu weights-on-disk cache-act-cpu 2-batches experts-cpu-routed experts-disk-load-all \
    experts-3-tiers; do
  [ -f "$work/$name.npy" ] || continue
  if cmp -s "$work/all-gpu.npy" "$work/$name.npy"; then
    echo "ok   $name: logits bitwise equal to cuda all-gpu"
  else
    echo "FAIL $name: cuda logits depend on the placement"; fails=$((fails + 1))
  fi
done
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
