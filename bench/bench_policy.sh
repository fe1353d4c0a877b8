#!/usr/bin/env bash
# The cost model against measurement, and --policy auto against hand-written
# policies, on this machine (issue: the policy).
#   bench/bench_policy.sh predict [MODEL] [PROMPT_LEN] [GEN]
#     runs policies of every kind (disk-bound, copy-bound, compute-bound, CPU
#     attention on and off, several block sizes) with --report, and prints
#     predicted beside measured prefill and decode time and their errors;
#   bench/bench_policy.sh auto [MODEL] [PROMPT_LEN] [GEN] [GPU_MEM] [CPU_MEM]
#     runs --policy auto and a grid of 12 hand-written policies under the
#     same budgets, interleaved, and prints auto's throughput / the best's.
# The profile is this machine's (flexgen profile, cached; measured first if
# missing). Defaults: opt-1.3b, prompt 32, 8 new tokens; auto: --gpu-mem 1G
# --cpu-mem 2G (forces the disk tier for opt-1.3b's 2.6 GB of weights).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-predict} model=${2:-opt-1.3b} S=${3:-32} G=${4:-8}
py=/usr/bin/python3
flexgen=$root/build/bin/flexgen
work=$(mktemp -d /var/tmp/flexgen-policy.XXXXXX)
trap 'rm -rf "$work"' EXIT
off=$root/flexgen-offload   # the profile's filesystem; the tier store is reused between runs
mkdir -p "$off"
"$flexgen" profile --offload-dir "$off" >/dev/null
gen_prompts() {  # count
  "$py" -c "import json, random; r = random.Random(0)
print(json.dumps([[2] + [r.randrange(4, 50000) for _ in range($S - 1)] for _ in range($1)]))" >"$work/p$1.json"
}
run() {  # name, prompts, args...
  local name=$1 n=$2; shift 2
  "$flexgen" run --dummy "$model" --prompt-ids "$work/p$n.json" --gen-len "$G" --ignore-eos --offload-dir "$off" \
    "$@" --out "$work/$name.jsonl" --report "$work/$name.json" 2>"$work/$name.log" \
    || { echo "run $name failed:"; grep error: "$work/$name.log"; return 1; }
}
if [ "$mode" = predict ]; then
  cases=(
    "disk-bound|32|--percent 0 0 100 0 100 0 --gpu-batch-size 4 --num-gpu-batches 8"
    "copy-bound|8|--percent 0 100 100 0 100 0 --gpu-batch-size 4 --num-gpu-batches 2"
    "compute-bound|32|--percent 100 0 100 0 100 0 --gpu-batch-size 8 --num-gpu-batches 4"
    "cpu-attn-on|32|--percent 100 0 0 100 100 0 --gpu-batch-size 8 --num-gpu-batches 4 --cpu-cache-compute"
    "cpu-attn-off|32|--percent 100 0 0 100 100 0 --gpu-batch-size 8 --num-gpu-batches 4"
    "weights-cpu-k1|4|--percent 0 100 100 0 100 0 --gpu-batch-size 4 --num-gpu-batches 1"
    "weights-cpu-k8|32|--percent 0 100 100 0 100 0 --gpu-batch-size 4 --num-gpu-batches 8"
  )
  for c in "${cases[@]}"; do
    IFS='|' read -r name n args <<<"$c"
    gen_prompts "$n"
    # shellcheck disable=SC2086
    run "$name" "$n" $args
  done
  "$py" - "$work" "${cases[@]}" <<'PY'
import json, statistics, sys
w = sys.argv[1]
print(f"{'policy':16} {'prefill s pred':>14} {'meas':>8} {'err':>7} {'decode s pred':>14} {'meas':>8} {'err':>7}"
      f" {'tok/s pred':>10} {'meas':>8} {'err':>7}  bottleneck (prefill / decode)")
errs = []
for c in sys.argv[2:]:
    name = c.split("|")[0]
    r = json.load(open(f"{w}/{name}.json"))
    p = r["predicted"]
    e = lambda pr, me: (pr - me) / me * 100
    row = [(p["prefill_s"], r["prefill_s"]), (p["decode_s"], r["decode_s"]),
           (p["throughput_tokens_per_s"], r["throughput_tokens_per_s"])]
    errs += [abs(e(*row[0])), abs(e(*row[1]))]
    print(f"{name:16} " + " ".join(f"{pr:14.3f} {me:8.3f} {e(pr, me):+6.1f}%" for pr, me in row)
          + f"  {p['prefill_bottleneck']} / {p['decode_bottleneck']}")
print(f"prefill and decode errors: median {statistics.median(errs):.1f}%, max {max(errs):.1f}% (target: every one within 15%)")
PY
else
  gpu=${5:-1G} cpu=${6:-2G}
  budgets=(--gpu-mem "$gpu" --cpu-mem "$cpu")
  gen_prompts 64
  hand=(   # each fits the default budgets (flexgen policy --percent ... scores them without "over_budget")
    "0 0 100 0 100 0|4|8" "0 0 100 0 100 0|8|8" "0 0 0 100 100 0|4|16" "0 0 0 100 100 0|8|8"
    "10 20 100 0 100 0|4|8" "0 40 100 0 100 0|2|32" "20 20 0 100 100 0|4|8" "0 30 0 100 0 100|8|8"
    "20 10 0 100 100 0|4|16" "10 30 0 100 0 100|8|8" "0 40 0 100 100 0|16|4" "0 30 100 0 100 0|8|4"
    "10 30 0 100 100 0|8|8"
  )
  "$flexgen" policy --dummy "$model" --prompt-ids "$work/p64.json" --gen-len "$G" --offload-dir "$off" "${budgets[@]}"
  run auto 64 "${budgets[@]}"   # first and last, so the disk's drift shows
  i=0
  for h in "${hand[@]}"; do
    IFS='|' read -r pct gbs k <<<"$h"
    # shellcheck disable=SC2086
    run "hand$i" 64 "${budgets[@]}" --percent $pct --gpu-batch-size "$gbs" --num-gpu-batches "$k" || true
    i=$((i + 1))
  done
  cp "$work/auto.json" "$work/auto-first.json"
  run auto 64 "${budgets[@]}"
  "$py" - "$work" "${#hand[@]}" <<'PY'
import json, os, sys
w, n = sys.argv[1], int(sys.argv[2])
t = lambda f: json.load(open(f))["throughput_tokens_per_s"]
auto = json.load(open(f"{w}/auto.json"))
first = json.load(open(f"{w}/auto-first.json"))
auto["throughput_tokens_per_s"] = (auto["throughput_tokens_per_s"] + first["throughput_tokens_per_s"]) / 2
print(f"  auto runs: {first['throughput_tokens_per_s']:.2f} first, {json.load(open(f'{w}/auto.json'))['throughput_tokens_per_s']:.2f} last; their mean below")
hands = [(t(f"{w}/hand{i}.json"), json.load(open(f"{w}/hand{i}.json"))["policy"]) for i in range(n) if os.path.exists(f"{w}/hand{i}.json")]
for x, p in sorted(hands, reverse=True): print(f"  hand {x:8.2f} tokens/s  {p}")
best = max(hands)
print(f"auto {auto['throughput_tokens_per_s']:.2f} tokens/s ({auto['policy']}; predicted "
      f"{auto['predicted']['throughput_tokens_per_s']:.2f}); best of {len(hands)} hand-written: {best[0]:.2f}; "
      f"ratio {auto['throughput_tokens_per_s'] / best[0]:.3f} (target >= 0.95)")
PY
fi
