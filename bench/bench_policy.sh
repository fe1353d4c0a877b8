#!/usr/bin/env bash
# The cost model against measurement, and --policy auto against hand-written
# policies, on this machine (issue: the policy).
#   bench/bench_policy.sh predict [MODEL] [PROMPT_LEN] [GEN]
#     runs policies of every kind (disk-bound, copy-bound, compute-bound, CPU
#     attention on and off, several block sizes) with --report, REPS times
#     each (default 3, interleaved), and prints the prediction beside the
#     measured medians of prefill and decode time and their errors (each
#     repetition's error against its own report's prediction, the median of
#     them); the profile is measured afresh first (this disk drifts by tens of
#     percent within an hour), unless REPROFILE=0; PAIRED=1 measures it afresh
#     before every repetition instead (about 9 minutes each on opt-1.3b here),
#     so each run is predicted from the profile taken minutes before it: this
#     host's speed moves from one quarter hour to the next;
#   bench/bench_policy.sh auto [MODEL] [PROMPT_LEN] [GEN] [GPU_MEM] [CPU_MEM]
#     runs --policy auto and a grid of at least 12 hand-written policies under
#     the same budgets (auto first and last, so the disk's drift shows), and
#     prints auto's throughput / the best's. PROMPTS prompts (default 64).
#     Then a final: auto and the FINALS best hand-written policies of that
#     first pass (default 3) run again ROUNDS times (default 3), one of each
#     per round in an order that rotates, and the ratio of their medians is
#     the figure. One run of a policy here spreads by 15% and more (the
#     disk's share of the host moves within minutes), so the best single run
#     of 13 is the luckiest draw, not the best policy; FINALS=0 skips it.
#     Grids for opt-1.3b (default budgets --gpu-mem 1G --cpu-mem 2G, which
#     force the disk tier for its 2.6 GB of weights) and opt-13b (default
#     budgets 4G / 10G against its 25.7 GB: most weights from disk; a run
#     takes about 2 minutes at prompt 4, 4 new tokens, 32 prompts:
#       bench/bench_policy.sh auto opt-13b 4 4   with PROMPTS=32).
# The profile is this machine's (flexgen profile, cached; measured first if
# missing). Defaults: opt-1.3b, prompt 32, 8 new tokens. KEEP=DIR keeps each
# run's report (--report) and log there for a later look; else they go.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-predict} model=${2:-opt-1.3b} S=${3:-32} G=${4:-8}
py=/usr/bin/python3
flexgen=$root/build/bin/flexgen
work=$(mktemp -d /var/tmp/flexgen-policy.XXXXXX)
trap 'if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$work"/. "$KEEP"/; fi; rm -rf "$work"' EXIT
off=$root/flexgen-offload   # the profile's filesystem; the tier store is reused between runs
mkdir -p "$off"
"$flexgen" profile --offload-dir "$off" --model "$model" >/dev/null
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
  reps=${REPS:-3}
  paired=${PAIRED:-0}
  [ "${REPROFILE:-1}" = 0 ] || [ "$paired" = 1 ] || "$flexgen" profile --reprofile --offload-dir "$off" --model "$model" >/dev/null
  for rep in $(seq "$reps"); do
    [ "$paired" = 1 ] && "$flexgen" profile --reprofile --offload-dir "$off" --model "$model" >/dev/null
    for c in "${cases[@]}"; do
      IFS='|' read -r name n args <<<"$c"
      gen_prompts "$n"
      # shellcheck disable=SC2086
      run "$name.$rep" "$n" $args
    done
  done
  "$py" - "$work" "$reps" "$paired" "${cases[@]}" <<'PY'
import json, statistics, sys
w, reps, paired = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
print(f"{'policy':16} {'prefill s pred':>14} {'meas':>8} {'err':>7} {'decode s pred':>14} {'meas':>8} {'err':>7}"
      f" {'tok/s pred':>10} {'meas':>8} {'err':>7}  bottleneck (prefill / decode); medians of {reps}; "
      f"[range of each repetition's prefill and decode error]")
errs = []
med = statistics.median
keys = ("prefill_s", "decode_s", "throughput_tokens_per_s")
for c in sys.argv[4:]:
    name = c.split("|")[0]
    rs = [json.load(open(f"{w}/{name}.{k}.json")) for k in range(1, reps + 1)]
    # each repetition against its own prediction (the profile it ran with:
    # one for all, or with PAIRED=1 the one measured just before it)
    e = {k: [(r["predicted"][k] - r[k]) / r[k] * 100 for r in rs] for k in keys}
    p = {k: med([r["predicted"][k] for r in rs]) for k in keys}
    m = {k: med([r[k] for r in rs]) for k in keys}
    errs += [abs(med(e["prefill_s"])), abs(med(e["decode_s"]))]
    print(f"{name:16} " + " ".join(f"{p[k]:14.3f} {m[k]:8.3f} {med(e[k]):+6.1f}%" for k in keys)
          + f"  {rs[0]['predicted']['prefill_bottleneck']} / {rs[0]['predicted']['decode_bottleneck']}"
          + "  [" + ", ".join(f"{min(e[k]):+.0f}..{max(e[k]):+.0f}%" for k in keys[:2]) + "]")
print(f"prefill and decode errors (median of each policy's repetitions; {'each repetition predicted from a profile measured just before it' if paired else 'one profile'}): "
      f"median {med(errs):.1f}%, max {max(errs):.1f}%, {sum(x <= 15 for x in errs)} of {len(errs)} within 15% (target: every one)")
PY
else
  np=${PROMPTS:-64}
  # each hand-written policy: percentages | gbs | K | other flags; each fits
  # the budgets (flexgen policy --percent ... --json says "over_budget": "")
  case $model in
    opt-13b)
      gpu=${5:-4G} cpu=${6:-10G}
      hand=(
        "11 27 100 0 100 0|8|4|" "11 27 100 0 100 0|4|8|" "11 27 100 0 100 0|16|2|" "11 27 100 0 100 0|32|1|"
        "0 35 100 0 100 0|8|4|" "0 0 100 0 100 0|8|4|" "5 30 0 100 100 0|8|4|"
        "5 30 0 100 100 0|8|4|--cpu-cache-compute" "11 27 100 0 0 100|8|4|" "0 20 100 0 100 0|16|2|"
        "10 25 0 100 100 0|16|2|--cpu-cache-compute" "11 20 100 0 100 0|4|4|" "11 27 100 0 100 0|8|2|"
      ) ;;
    *)
      gpu=${5:-1G} cpu=${6:-2G}
      hand=(
        "0 0 100 0 100 0|4|8|" "0 0 100 0 100 0|8|8|" "0 0 0 100 100 0|4|16|" "0 0 0 100 100 0|8|8|"
        "10 20 100 0 100 0|4|8|" "0 40 100 0 100 0|2|32|" "20 20 0 100 100 0|4|8|" "0 30 0 100 0 100|8|8|"
        "20 10 0 100 100 0|4|16|" "10 30 0 100 0 100|8|8|" "0 40 0 100 100 0|16|4|" "0 30 100 0 100 0|8|4|"
        "10 30 0 100 100 0|8|8|"
      ) ;;
  esac
  budgets=(--gpu-mem "$gpu" --cpu-mem "$cpu")
  gen_prompts "$np"
  "$flexgen" policy --dummy "$model" --prompt-ids "$work/p$np.json" --gen-len "$G" --offload-dir "$off" "${budgets[@]}"
  run auto "$np" "${budgets[@]}"   # first and last, so the disk's drift shows
  run_hand() {  # run name, index into hand (a failed run leaves no report: it drops out)
    local pct gbs k extra
    IFS='|' read -r pct gbs k extra <<<"${hand[$2]}"
    # shellcheck disable=SC2086
    run "$1" "$np" "${budgets[@]}" --percent $pct --gpu-batch-size "$gbs" --num-gpu-batches "$k" $extra || true
  }
  for i in "${!hand[@]}"; do run_hand "hand$i" "$i"; done
  cp "$work/auto.json" "$work/auto-first.json"
  run auto "$np" "${budgets[@]}"
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
  finals=${FINALS:-3} rounds=${ROUNDS:-3}
  [ "$finals" -gt 0 ] || exit 0
  # the first pass's best hand-written policies, by their single run
  mapfile -t top < <("$py" -c "import json, os, sys
w, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = [(json.load(open(f'{w}/hand{i}.json'))['throughput_tokens_per_s'], i) for i in range(n) if os.path.exists(f'{w}/hand{i}.json')]
print('\n'.join(str(i) for _, i in sorted(t, reverse=True)[:k]))" "$work" "${#hand[@]}" "$finals")
  names=(auto "${top[@]/#/hand}")
  echo "final: ${names[*]}, $rounds rounds, the order rotating"
  for r in $(seq "$rounds"); do
    for j in $(seq 0 $((${#names[@]} - 1))); do
      name=${names[$(((j + r - 1) % ${#names[@]}))]}
      if [ "$name" = auto ]; then run "final-auto.$r" "$np" "${budgets[@]}"
      else run_hand "final-$name.$r" "${name#hand}"; fi
    done
  done
  "$py" - "$work" "$rounds" "${names[@]}" <<'PY'
import json, os, statistics, sys
w, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
res = {}
for n in names:
    rs = [json.load(open(f)) for f in (f"{w}/final-{n}.{r}.json" for r in range(1, rounds + 1)) if os.path.exists(f)]
    if rs:
        res[n] = (statistics.median(r["throughput_tokens_per_s"] for r in rs), rs)
for n, (m, rs) in sorted(res.items(), key=lambda x: -x[1][0]):
    print(f"  {n:6} median {m:6.2f} tokens/s of {len(rs)} [" + ", ".join(f"{r['throughput_tokens_per_s']:.2f}" for r in rs)
          + f"]  {rs[0]['policy']}")
hands = [(m, n) for n, (m, _) in res.items() if n != "auto"]
if "auto" not in res or not hands:
    sys.exit("final: no result to compare: the runs failed (KEEP=DIR keeps their logs)")
best = max(hands)
print(f"final: auto median {res['auto'][0]:.2f} tokens/s; best hand-written median {best[0]:.2f} ({best[1]}); "
      f"ratio {res['auto'][0] / best[0]:.3f} (target >= 0.95)")
PY
fi
