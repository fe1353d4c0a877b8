#!/usr/bin/env bash
# The GPU checks as one prepared script, for a machine with an NVIDIA GPU
# (sized for one H200, 16 cores, 128 GiB: under 10 minutes with the format
# tests; the Qwen3 / experts step adds at most 4, a guess: none of it has
# run on a GPU yet). Every step has its own time limit and writes under OUT_DIR, so
# whatever finished is kept when a later step fails or runs out of time. Usage: scripts/gpu-check.sh OUT_DIR
#   gpu.txt            nvidia-smi's view of the device
#   build.log          the CUDA build (sm_75, sm_80, sm_90, -Werror)
#   ctest-gpu.log      cuda_backend_ops (every op, host vs cuda, OPT,
#                      Llama-family, Qwen3 and mixture-of-experts shapes,
#                      MOE_ROUTE's counts, a 4-bit cache), cuda_e2e_tokens and
#                      cuda_e2e_tokens_llama (flexgen run, cuda vs host tokens)
#   ctest-gpu-moe.log  Qwen3's q/k norms, the mixtures of experts and the
#                      4-bit KV cache end to end: cuda_e2e_tokens_qwen3,
#                      cuda_e2e_tokens_mixtral, cuda_e2e_tokens_qwen3_moe
#                      (experts on every tier, loaded as routed and all at
#                      once), cuda_e2e_tokens_llama_q4cache, and
#                      cuda_backend_ops_selftest (the routing bounds, host
#                      against host)
#   ctest-gpu-formats.log
#                      the weight formats on the GPU: cuda_fmt (every
#                      format's device dequantizer bitwise vs the CPU, the
#                      quantized Linear within a derived bound),
#                      cuda_backend_ops_formats (every op on layers in each
#                      format, the experts' MLP and MOE_ROUTE too),
#                      cuda_e2e_tokens_gguf_q4km (a Q4_K_M-like GGUF file,
#                      cuda vs host tokens)
#   profile.json/.txt  flexgen-gpu-worker --profile --device cuda --model
#                      opt-6.7b: the LAYER op's TFLOP/s by rows beside bare
#                      cuBLAS of the same shapes (mm vs mm_bare), copies from
#                      registered shm beside cudaMallocHost (h2d/d2h_GBps vs
#                      *_pinned_GBps)
#   blockrow.txt       opt-1.3b, weights on the CPU, K 8: zig-zag block vs row
#   e2e-*.json         --report of opt-6.7b all on the GPU and of opt-30b
#                      with --gpu-mem 16G, prompt 512, 32 new tokens
#   summary.txt        the figures, one line each
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/gpu-check.sh OUT_DIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
py=/usr/bin/python3
bin=$root/build/bin
work=$(mktemp -d /var/tmp/flexgen-gpu-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
note() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$out/summary.txt"; }
step() { # LIMIT_S NAME COMMAND...: run with a time limit, note how it ended
  local lim=$1 name=$2; shift 2
  timeout --kill-after=10 "$lim" "$@"
  local rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && note "$name: TIMED OUT after $lim s"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && note "$name: FAILED (exit $rc)"
  return $rc
}
: >"$out/summary.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$out/gpu.txt" 2>&1
note "device: $(tail -1 "$out/gpu.txt")"

# ---- build ------------------------------------------------------------------
"$root/scripts/deps.sh" >"$out/deps.log" 2>&1 || note "deps.sh failed (offline?): building with what is installed"
if ! step 180 build "$root/scripts/build.sh" -DFG_CUDA=ON -DFG_WERROR=ON >"$out/build-out.log" 2>&1; then
  cp "$root/build/build.log" "$out/build.log" 2>/dev/null
  exit 1
fi
cp "$root/build/build.log" "$out/build.log"
note "build: ok ($(ls "$root/build/bin/libflexgen-cuda.so" 2>/dev/null || echo 'NO cuda module'))"

# ---- GPU tests ----------------------------------------------------------------
fmt_tests='cuda_fmt|cuda_backend_ops_formats|gguf_q4km'
moe_tests='cuda_e2e_tokens_qwen3|cuda_e2e_tokens_mixtral|cuda_e2e_tokens_llama_q4cache|cuda_backend_ops_selftest'
(cd "$root/build" && step 180 ctest ctest --output-on-failure -V -R 'cuda_' -E "$fmt_tests|$moe_tests") \
  >"$out/ctest-gpu.log" 2>&1
note "tests: $(grep -E '^[0-9]+% tests passed' "$out/ctest-gpu.log" || echo 'no summary')"
grep -E '^FAIL|Skipped|\*\*\*Failed' "$out/ctest-gpu.log" | head -20 | tee -a "$out/summary.txt"
# the weight formats' kernels: a step of their own, so that a failure or a
# hang there leaves the tests above and the figures below as they are
(cd "$root/build" && step 200 ctest ctest --output-on-failure -V -R "$fmt_tests") >"$out/ctest-gpu-formats.log" 2>&1
note "format tests: $(grep -E '^[0-9]+% tests passed' "$out/ctest-gpu-formats.log" || echo 'no summary')"
grep -E '^FAIL|Skipped|\*\*\*Failed' "$out/ctest-gpu-formats.log" | head -20 | tee -a "$out/summary.txt"
# Qwen3, the mixtures of experts and the 4-bit cache end to end: their own step, as the formats'
(cd "$root/build" && step 240 ctest ctest --output-on-failure -V -j2 -R "$moe_tests") >"$out/ctest-gpu-moe.log" 2>&1
note "qwen3 / experts tests: $(grep -E '^[0-9]+% tests passed' "$out/ctest-gpu-moe.log" || echo 'no summary')"
grep -E '^FAIL|Skipped|\*\*\*Failed' "$out/ctest-gpu-moe.log" | head -20 | tee -a "$out/summary.txt"

# ---- profile: layer GEMMs vs bare cuBLAS, registered shm vs cudaMallocHost -----------
if step 60 profile "$bin/flexgen-gpu-worker" --profile --device cuda --model opt-6.7b --json \
    >"$out/profile.json" 2>"$out/profile.log"; then
  "$py" - "$out/profile.json" <<'PY' | tee "$out/profile.txt" | tee -a "$out/summary.txt"
import json, sys
p = json.load(open(sys.argv[1]))
print("profile: " + p["info"])
for m, b in zip(p["mm"], p["mm_bare"]):
    print("  rows %5d: layer %7.2f TFLOP/s, bare cuBLAS %7.2f TFLOP/s, layer/bare %.2f"
          % (m["rows"], m["TFLOPS"], b["TFLOPS"], m["TFLOPS"] / b["TFLOPS"] if b["TFLOPS"] else 0))
print("  attention: decode %.1f GB/s of KV cache, prefill %.1f TFLOP/s" % (p["attn_decode_GBps"], p["attn_prefill_TFLOPS"]))
print("  H2D %.1f GB/s from registered shm vs %.1f from cudaMallocHost (%.2f)"
      % (p["h2d_GBps"], p["h2d_pinned_GBps"], p["h2d_GBps"] / p["h2d_pinned_GBps"]))
print("  D2H %.1f GB/s to registered shm vs %.1f to cudaMallocHost (%.2f)"
      % (p["d2h_GBps"], p["d2h_pinned_GBps"], p["d2h_GBps"] / p["d2h_pinned_GBps"]))
PY
fi

# ---- end-to-end runs ----------------------------------------------------------------
prompts() { # N LEN -> file
  "$py" -c "import json, random; r = random.Random(1)
print(json.dumps([[2] + [r.randrange(4, 50000) for _ in range($2 - 1)] for _ in range($1)]))" >"$work/p-$1-$2.json"
  echo "$work/p-$1-$2.json"
}
run() { # LIMIT NAME ARGS...: flexgen run with a report; one summary line
  local lim=$1 name=$2; shift 2
  if step "$lim" "$name" "$bin/flexgen" run --device cuda --ignore-eos --offload-dir "$work/off" "$@" \
      --out "$work/$name.jsonl" --report "$out/$name.json" 2>"$out/$name.log"; then
    "$py" -c "import json, sys; r = json.load(open(sys.argv[1]))
print('%s: %.1f tokens/s (prefill %.2f s, decode %.2f s)' % (sys.argv[2], r['throughput_tokens_per_s'], r['prefill_s'], r['decode_s']))" \
      "$out/$name.json" "$name" | tee -a "$out/summary.txt"
  else
    grep -E 'error' "$out/$name.log" | head -3 | tee -a "$out/summary.txt"
  fi
}
# the zig-zag block schedule's gain where weights cross PCIe for every batch
p=$(prompts 64 128)
common=(--dummy opt-1.3b --prompt-ids "$p" --gen-len 8 --gpu-batch-size 8 --num-gpu-batches 8
        --percent 0 100 100 0 100 0)
run 45 blockrow-block "${common[@]}"
run 75 blockrow-row "${common[@]}" --schedule row
"$py" -c "import json, sys; b, r = (json.load(open(f))['throughput_tokens_per_s'] for f in sys.argv[1:])
print('block/row (opt-1.3b, weights on the CPU, K 8): %.2f' % (b / r))" "$out/blockrow-block.json" \
  "$out/blockrow-row.json" 2>/dev/null | tee "$out/blockrow.txt" | tee -a "$out/summary.txt"

# FlexGen's headline settings, prompt 512, 32 new tokens
run 75 e2e-opt-6.7b --dummy opt-6.7b --prompt-ids "$(prompts 16 512)" --gen-len 32 --gpu-batch-size 16 \
  --percent 100 0 100 0 100 0 --gpu-mem 100G
# opt-30b: 60 GB of weights, 20% on the GPU (what 16G leaves beside two
# layer slots and the workspace), 10% on disk so the shared memory (weights,
# a 12 GB cache of 16 sequences) stays under /dev/shm's default half of RAM
run 240 e2e-opt-30b --dummy opt-30b --prompt-ids "$(prompts 16 512)" --gen-len 32 --gpu-batch-size 8 \
  --num-gpu-batches 2 --percent 20 70 0 100 0 100 --cpu-cache-compute --gpu-mem 16G --cpu-mem 60G
note "done"
