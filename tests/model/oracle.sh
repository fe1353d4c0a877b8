#!/usr/bin/env bash
# Compares `flexgen run --engine reference` with the numpy oracle on a random
# checkpoint: dumped logits and greedy tokens.
# Usage: oracle.sh FLEXGEN WORKDIR "<make_checkpoint args>" GEN_LEN [prompt-ids json]
# FG_ORACLE_FLAGS (e.g. "--compress-weight --compress-cache") go to both sides;
# FG_ORACLE_ATOL replaces the tolerance. FG_ORACLE_FAMILY=llama makes the
# checkpoint with make_llama_checkpoint.py (its --case names) and compares
# with llama_ref.py, the Llama family's oracle; the tolerance reasoning below
# holds for it as for OPT (the same fp32 math between the same kind of fp16
# rounding points, in another summation order; measured up to 2e-3 on its
# cases: MHA, GQA 8:1, MQA, llama3 rope scaling, tied head, q/k/v biases,
# sharded BF16, Mistral's sliding window, Qwen3's q/k norms, and the
# mixtures of experts). With experts, a step after a routing near-tie (the
# oracle's k-th and (k+1)-th router logits within 1e-3) may diverge:
# compare.py says why and bounds how much of the run that may excuse.
#
# With a 4-bit KV cache (--compress-cache) the tolerance is 3e-2: a k or v
# entry one fp16 ulp apart (the summation order above) can quantize into the
# neighbouring 4-bit bin, a jump of 1/15 of its group's range in one cached
# value, ~100 times the ulp (measured: up to 1.3e-2). Compressed weights need
# no more than 1e-2: both sides expand them to the same fp16 values.
#
# Tolerance: atol 1e-2 on logits of O(1) magnitude. Both sides compute in fp32
# and round to fp16 at the same points; they differ only in summation order
# (sgemm blocking vs numpy's matmul), which now and then moves a value across
# an fp16 rounding boundary: one fp16 ulp is 2^-11 relative (~5e-4 at 1.0),
# and a few such flips carried through a handful of layers stay well under
# 1e-2 (measured: ~1e-3). A greedy divergence is accepted only at a near-tie
# (top-two margin of the oracle < atol), where it is checked instead that the
# engine's pick scores within atol of the oracle's best.
set -euo pipefail
flexgen=$1 work=$2 ckpt_args=$3 gen=$4
prompts=${5:-}
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
maker=make_checkpoint.py oracle=opt_ref.py bos=2
if [ "${FG_ORACLE_FAMILY:-opt}" = llama ]; then maker=make_llama_checkpoint.py oracle=llama_ref.py bos=1; fi
# shellcheck disable=SC2086
"$py" "$ref/$maker" --out "$work/model" $ckpt_args >/dev/null
if [ -z "$prompts" ]; then
  # different lengths: the batch is left-padded
  prompts="[[$bos, 10, 20, 30, 40, 50, 60], [$bos, 7], [$bos, 99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89], [$bos, 5, 6, 7]]"
fi
echo "$prompts" > "$work/prompts.json"
"$flexgen" run --engine reference --model "$work/model" --prompt-ids "$work/prompts.json" --gen-len "$gen" \
  --ignore-eos --out "$work/c.jsonl" --dump-logits "$work/c.npy" ${FG_ORACLE_FLAGS:-}
"$py" "$ref/$oracle" --model "$work/model" --prompt-ids "$work/prompts.json" --gen-len "$gen" \
  --out-logits "$work/r.npy" --out-tokens "$work/r.json" ${FG_ORACLE_FLAGS:-}
"$py" "$ref/compare.py" --ref-logits "$work/r.npy" --ref-tokens "$work/r.json" --jsonl "$work/c.jsonl" \
  --logits "$work/c.npy" --atol "${FG_ORACLE_ATOL:-1e-2}"
rm -rf "$work"
