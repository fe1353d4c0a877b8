#!/usr/bin/env bash
# The pipeline's cost model (flexgen policy --stages P) in FlexGen's
# multi-machine setting: OPT-30B and OPT-175B on 1, 2 and 4 T4 machines,
# each with FlexGen's T4 budgets (as bench_policy_t4.sh: GPU 15G, CPU 200G,
# disk 1500G of the machine's 16 GB, 208 GB, 1.5 TB), prompt 512, 32 new
# tokens, on FlexGen's fitted T4 constants (--hardware flexgen-t4; the
# network: 32 Gbit/s, 100 us a message, an assumption, see fg_hw.c). For
# each P: the policy the search picks (the same on every machine), its
# predicted generation throughput, the speedup over P = 1, the bottleneck;
# for P = 1 and 4 also FlexGen's own policy for that setting scored by the
# same model (P = 1: its README's, as bench_policy_t4.sh; P = 4: its
# benchmark/flexgen/bench_{30b,175b}_4x1.sh, 4 machines with one T4 each);
# and FlexGen's published multi-GPU throughput where it could be found.
# Usage: bench/bench_pipeline_t4.sh   (no GPU, no MPI: the model alone)
# Env: GPU_MEM CPU_MEM DISK_MEM (per machine), NET_GBPS, NET_LATENCY_US.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
flexgen=$root/build/bin/flexgen
py=/usr/bin/python3
off=$(mktemp -d /var/tmp/flexgen-pipe.XXXXXX)
trap 'rm -rf "$off"' EXIT
common=(--prompt-len 512 --gen-len 32 --hardware flexgen-t4 --gpu-mem "${GPU_MEM:-15G}" --cpu-mem "${CPU_MEM:-200G}"
        --disk-mem "${DISK_MEM:-1500G}" --offload-dir "$off" --json)
[ -n "${NET_GBPS:-}" ] && common+=(--net-gbps "$NET_GBPS")
[ -n "${NET_LATENCY_US:-}" ] && common+=(--net-latency-us "$NET_LATENCY_US")
# model | P | FlexGen's policy for that P ("" where none) | FlexGen's published generation throughput (tokens/s)
# Published multi-GPU figures: FlexGen's paper runs this experiment ("scaling
# to multiple GPUs", 1, 2 and 4 T4 machines); its text could not be
# retrieved here, so no figure is printed (n/a) rather than one from memory.
# Its README gives the 1-GPU figures (OPT-30B 7.32, OPT-175B 0.69 tokens/s);
# its maintainers describe the 4-machine results as super-linear
# (github.com/FMInference/FlexLLMGen/issues/105), without a number.
cases=(
  "opt-30b|1|--percent 20 80 0 100 0 100 --gpu-batch-size 48 --num-gpu-batches 3 --cpu-cache-compute|7.32 (README, 1 T4)"
  "opt-30b|2||n/a"
  "opt-30b|4|--percent 20 80 0 100 0 100 --gpu-batch-size 64 --num-gpu-batches 3 --cpu-cache-compute|n/a"
  "opt-175b|1|--percent 0 50 0 0 0 100 --gpu-batch-size 32 --num-gpu-batches 8 --cpu-cache-compute|0.69 (README, 1 T4)"
  "opt-175b|2||n/a"
  "opt-175b|4|--percent 0 100 0 100 0 100 --gpu-batch-size 40 --num-gpu-batches 1 --cpu-cache-compute|n/a"
)
printf "%-8s %2s | %-52s %9s %7s  %-22s | %-44s %9s | %s\n" model P "ours: policy (every machine)" "tokens/s" "x P=1" \
  bottleneck "FlexGen's policy for this P" "tokens/s" "published"
base=""
for c in "${cases[@]}"; do
  IFS='|' read -r model P theirs published <<<"$c"
  ours=$("$flexgen" policy --dummy "$model" "${common[@]}" --stages "$P")
  scored=null
  # shellcheck disable=SC2086
  [ -n "$theirs" ] && scored=$("$flexgen" policy --dummy "$model" "${common[@]}" --stages "$P" $theirs 2>/dev/null)
  [ "$P" = 1 ] && base=$ours
  "$py" - "$model" "$P" "$ours" "$scored" "$theirs" "$published" "$base" <<'PY'
import json, sys
model, P, ours, scored, theirs, published, base = sys.argv[1:8]
ours, scored, base = json.loads(ours), json.loads(scored), json.loads(base)
tput = lambda j: j["predicted_throughput_tokens_per_s"]
p = ours["policy"]
flags = ("--percent " + " ".join("%g" % x for x in p["percent"]) + f" gbs {p['gpu_batch_size']} x {p['num_gpu_batches']}"
         + (" cpu-attn" if p["cpu_cache_compute"] else ""))
pl = ours.get("pipeline")
bott = pl["bottleneck"] if pl else "decode: " + ours["decode_bottleneck"]
t = (theirs.replace("--gpu-batch-size ", "gbs ").replace(" --num-gpu-batches ", " x ").replace("--cpu-cache-compute", "cpu-attn")
     if theirs else "-")
ts = f"{tput(scored):9.3f}" if scored else f"{'-':>9}"
print(f"{model:8} {P:>2} | {flags:52} {tput(ours):9.3f} {tput(ours) / tput(base):6.2f}x  {bott:22} | {t:44} {ts} | {published}")
if pl:
    st = pl["stage"]
    print(f"{'':11}   block {pl['sequences_per_block']} sequences ({P} groups of {p['num_gpu_batches']} x {p['gpu_batch_size']}); "
          f"a decode token: stages {pl['decode_token_bounds_s']['stage']:.3g} s, network {pl['decode_token_bounds_s']['network']:.3g} s, "
          f"ring {pl['decode_token_bounds_s']['ring']:.3g} s; prefill {ours['predicted_prefill_s']:.4g} s (fill {pl['fill_s']:.4g} s), "
          f"decode {ours['predicted_decode_s']:.4g} s; per machine gpu {ours['memory_bytes']['gpu'] / 1e9:.3g} GB, "
          f"cpu {ours['memory_bytes']['cpu'] / 1e9:.3g} GB, disk {ours['memory_bytes']['disk'] / 1e9:.3g} GB")
if scored and scored.get("over_budget"):
    print(f"{'':11}   (FlexGen's policy exceeds this engine's memory plan here, scored without the budgets: {scored['over_budget'][:120]})")
PY
done
