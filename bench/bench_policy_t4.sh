#!/usr/bin/env bash
# FlexGen's own setting, on FlexGen's fitted T4 constants (--hardware
# flexgen-t4): prompt 512, 32 new tokens, GPU 15G, CPU 200G, disk 1500G.
# For OPT-6.7B, 30B and 175B it prints the policy our search picks and its
# predicted throughput, FlexGen's published hand-picked policy scored by the
# same cost model, and FlexGen's measured throughput on a T4 (its README).
# The search must predict at least as well as the published policy.
# Usage: bench/bench_policy_t4.sh   (no GPU needed: this is the model alone)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
flexgen=$root/build/bin/flexgen
py=/usr/bin/python3
off=$(mktemp -d /var/tmp/flexgen-t4.XXXXXX)
trap 'rm -rf "$off"' EXIT
common=(--prompt-len 512 --gen-len 32 --hardware flexgen-t4 --gpu-mem 15G --cpu-mem 200G --disk-mem 1500G
        --offload-dir "$off" --json)
# model | FlexGen's policy (its benchmark scripts) | FlexGen's measured tokens/s on a T4
cases=(
  "opt-6.7b|--percent 100 0 100 0 100 0 --gpu-batch-size 2 --num-gpu-batches 1|25.26"
  "opt-30b|--percent 20 80 0 100 0 100 --gpu-batch-size 48 --num-gpu-batches 3 --cpu-cache-compute|7.32"
  "opt-175b|--percent 0 50 0 0 0 100 --gpu-batch-size 32 --num-gpu-batches 8 --cpu-cache-compute|0.69"
)
printf "%-9s %-62s %10s | %-50s %10s | %9s\n" model "ours: policy" "predicted" "FlexGen's policy" "predicted" "measured"
for c in "${cases[@]}"; do
  IFS='|' read -r model theirs measured <<<"$c"
  ours=$("$flexgen" policy --dummy "$model" "${common[@]}")
  # shellcheck disable=SC2086
  scored=$("$flexgen" policy --dummy "$model" "${common[@]}" $theirs)
  "$py" - "$model" "$ours" "$scored" "$theirs" "$measured" <<'PY'
import json, sys
model, ours, scored, theirs, measured = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
p = ours["policy"]
flags = ("--percent " + " ".join("%g" % x for x in p["percent"]) + f" gbs {p['gpu_batch_size']} x {p['num_gpu_batches']}"
         + (" cpu-attn" if p["cpu_cache_compute"] else ""))
t = theirs.replace("--gpu-batch-size ", "gbs ").replace(" --num-gpu-batches ", " x ").replace("--cpu-cache-compute", "cpu-attn")
print(f"{model:9} {flags:62} {ours['predicted_throughput_tokens_per_s']:10.3f} | {t:50} "
      f"{scored['predicted_throughput_tokens_per_s']:10.3f} | {float(measured):9.2f}")
print(f"{'':9}   search {ours['search_s']:.3f} s over {ours['cases']} cases; bottlenecks ours "
      f"{ours['prefill_bottleneck']}/{ours['decode_bottleneck']}, theirs {scored['prefill_bottleneck']}/{scored['decode_bottleneck']}"
      f"; ours/theirs predicted {ours['predicted_throughput_tokens_per_s'] / scored['predicted_throughput_tokens_per_s']:.2f}x")
PY
done
