#!/usr/bin/env bash
# The cost model per weight format on a quantized GGUF file larger than
# memory (issue 33): --policy auto's choice with one GEMM rate table for
# every format (the cost model before: this machine's profile with its
# per-format tables taken out, so F16's rates stand in for Q4_K's and
# Q6_K's) and with the formats' own (the same profile whole), then runs of
# both choices with the same budgets, each run's prediction (the new cost
# model's, from its --report) beside what it measured.
#   1. the file: bench/gguf_random.py --size llama-2-70b --mix MIX (default
#      q4_k_m) --layers LAYERS (default 48: 25 GB, more than this machine's
#      24 GiB; the tier store beside it takes as much again), or GGUF=FILE;
#   2. flexgen policy on this machine's profile (measured first where it
#      lacks the model's shape or formats: the gpu tier at llama-2-70b's
#      layer shape takes several minutes on 2 cores), and on a copy without
#      mm_fmt (the old cost model; BASE=DIR runs an older build's flexgen
#      policy on the same profile beside it, for a check);
#   3. RUNS (default 1) runs of each policy, interleaved (one where the two
#      choices are the same), and of the policies EXTRA names
#      ("WG WC CG CC HG HC|GBS|K;...": the runner-up, an earlier choice),
#      each scored by both cost models too, PROMPTS (32) prompts of
#      PROMPT_LEN (8) tokens, GEN (4) new, under --gpu-mem GPU_MEM (4G)
#      --cpu-mem CPU_MEM (12G), as bench_llamacpp.sh case c.
# Tokens/s is the report's: generated tokens over prefill + decode.
# OFFLOAD_DIR (default /var/tmp) holds the file, the tier store and the
# runs; all removed at exit unless KEEP=DIR (reports and logs copied there).
# Usage: [LAYERS=48] [MIX=q4_k_m] [GGUF=FILE] [RUNS=1] [EXTRA="PCT|GBS|K;..."] [PROMPTS=32]
#        [PROMPT_LEN=8] [GEN=4] [GPU_MEM=4G] [CPU_MEM=12G] [BASE=DIR] [OFFLOAD_DIR=/var/tmp]
#        bench/bench_policy_fmt.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
flexgen=$root/build/bin/flexgen
work=$(mktemp -d "${OFFLOAD_DIR:-/var/tmp}/flexgen-policy-fmt.XXXXXX") || exit 1
trap 'if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/*.json "$work"/*.log "$KEEP"/ 2>/dev/null; fi; rm -rf "$work"' EXIT
n=${PROMPTS:-32} S=${PROMPT_LEN:-8} G=${GEN:-4} runs=${RUNS:-1}
budgets=(--gpu-mem "${GPU_MEM:-4G}" --cpu-mem "${CPU_MEM:-12G}")
echo "bench_policy_fmt: $(date -u +%FT%TZ), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg)"

gguf=${GGUF:-$work/model.gguf}
if [ -z "${GGUF:-}" ]; then
  "$py" "$root/bench/gguf_random.py" --size llama-2-70b --out "$gguf" --mix "${MIX:-q4_k_m}" --layers "${LAYERS:-48}" ||
    exit 1
fi
"$py" -c 'import json, random, sys; r = random.Random(6); n, s = int(sys.argv[1]), int(sys.argv[2])
print(json.dumps([[1] + [r.randrange(259, 32000) for _ in range(s - 1)] for _ in range(n)]))' "$n" "$S" >"$work/p.json"
common=(--model "$gguf" --prompt-ids "$work/p.json" --gen-len "$G" --offload-dir "$work/off" "${budgets[@]}")

# ---- 2. the two choices ----------------------------------------------------------
"$flexgen" policy "${common[@]}" --json >"$work/after.json" 2>"$work/after.log" ||
  { grep error "$work/after.log"; exit 1; }
grep "profile \[" "$work/after.log" | sed 's/^.*info: /  measured: /'
prof=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["hardware"])' "$work/after.json")
"$py" -c 'import json, sys; p = json.load(open(sys.argv[1]))
for s in [p["gpu"]] + p.get("shapes", []): s.pop("mm_fmt", None)
json.dump(p, open(sys.argv[2], "w"))' "$prof" "$work/one-table.json"
"$flexgen" policy "${common[@]}" --hardware "$work/one-table.json" --json >"$work/before.json" 2>"$work/before.log" ||
  { grep error "$work/before.log"; exit 1; }
if [ -n "${BASE:-}" ]; then
  "$BASE/flexgen" policy "${common[@]}" --hardware "$prof" --json >"$work/base.json" 2>"$work/base.log" ||
    { grep error "$work/base.log"; exit 1; }
fi
flags() {   # the policy of a flexgen policy --json as flexgen run flags
  "$py" -c 'import json, sys; p = json.load(open(sys.argv[1]))["policy"]
print(" ".join(["--percent"] + ["%g" % x for x in p["percent"]] + ["--gpu-batch-size", str(p["gpu_batch_size"]),
      "--num-gpu-batches", str(p["num_gpu_batches"])] + (["--cpu-cache-compute"] if p["cpu_cache_compute"] else [])))' "$1"
}
"$py" - "$work" <<'PY'
import json, os, sys
w = sys.argv[1]
a = json.load(open(f"{w}/after.json"))
print(f"profile {a['hardware']}; GEMM rates charged (TFLOPS at the chosen policy's decode and prefill rows):")
for k, e in a["gemm_rates"].items():
    print(f"  {k:5} {e['decode_TFLOPS']:.4f} at {e['decode_rows']:g} rows, {e['prefill_TFLOPS']:.4f} at "
          f"{e['prefill_rows']:g}{' (LM head)' if e['lm_head'] else ''}{'' if e['measured'] else ' (F16s: not measured)'}")
for name, what in (("before", "one table (F16's for every format)"), ("base", "an older build, the same profile"),
                   ("after", "each format's own table")):
    if not os.path.exists(f"{w}/{name}.json"):
        continue
    d = json.load(open(f"{w}/{name}.json"))
    p = d["policy"]
    print(f"{name:6} ({what}): gbs {p['gpu_batch_size']} x {p['num_gpu_batches']}, weights gpu/cpu/disk "
          f"{'/'.join('%g' % x for x in p['percent'][:2])}/{100 - sum(p['percent'][:2]):g}, cache "
          f"{'/'.join('%g' % x for x in p['percent'][2:4])}, act {'/'.join('%g' % x for x in p['percent'][4:])}"
          f"{', cpu attention' if p['cpu_cache_compute'] else ''}; predicted {d['predicted_throughput_tokens_per_s']:.4g} "
          f"tokens/s (prefill {d['predicted_prefill_s']:.4g} s by {d['prefill_bottleneck']}, decode "
          f"{d['predicted_decode_s']:.4g} s by {d['decode_bottleneck']})")
PY

# ---- 3. runs: the two choices and EXTRA's, each scored by both models -----------------
names=(after)
[ "$(flags "$work/before.json")" = "$(flags "$work/after.json")" ] || names+=(before)
IFS=';' read -ra extra <<<"${EXTRA:-}"
for i in "${!extra[@]}"; do
  IFS='|' read -r pct gbs k <<<"${extra[$i]}"
  echo "--percent $pct --gpu-batch-size $gbs --num-gpu-batches $k" >"$work/extra$i.flags"
  names+=("extra$i")
done
for name in "${names[@]}"; do   # NAME.old.json, NAME.new.json: the policy scored by each model
  [ -f "$work/$name.flags" ] || flags "$work/$name.json" >"$work/$name.flags"
  for m in old new; do
    hw=$prof; [ "$m" = old ] && hw=$work/one-table.json
    # shellcheck disable=SC2046
    "$flexgen" policy "${common[@]}" --hardware "$hw" $(cat "$work/$name.flags") --json >"$work/$name.$m.json" \
      2>/dev/null || { echo "  $name: $(cat "$work/$name.flags") cannot be scored"; continue 2; }
  done
done
for r in $(seq "$runs"); do
  for name in "${names[@]}"; do
    echo "  run $name $r/$runs: $(cat "$work/$name.flags"), load $(cut -d' ' -f1-3 /proc/loadavg)"
    # shellcheck disable=SC2046
    "$flexgen" run "${common[@]}" --ignore-eos --hardware "$prof" $(cat "$work/$name.flags") \
      --out "$work/$name-$r.jsonl" --report "$work/$name-$r.json" 2>"$work/$name-$r.log" ||
      { grep error "$work/$name-$r.log" | tail -3; continue; }
  done
done
"$py" - "$work" "$runs" "${names[@]}" <<'PY'
import json, os, statistics, sys
w, runs, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
label = {"after": "the new model's choice" + ("" if "before" in names else " (the old model's too)"),
         "before": "the old model's choice"}
print()
print("| policy | gbs x K | weights gpu/cpu/disk | predicted tok/s: old model / new | measured tok/s "
      "| prefill s: old / new / measured | decode s: old / new / measured |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name in names:
    if not os.path.exists(f"{w}/{name}.new.json"):
        continue
    old, new = (json.load(open(f"{w}/{name}.{m}.json")) for m in ("old", "new"))
    p = new["policy"]
    rs = [json.load(open(f)) for f in (f"{w}/{name}-{r}.json" for r in range(1, runs + 1)) if os.path.exists(f)]
    med = lambda k: statistics.median(r[k] for r in rs) if rs else float("nan")
    both = lambda k: f"{old['predicted_' + k]:.4g} / {new['predicted_' + k]:.4g}"
    print(f"| {label.get(name, name)} | {p['gpu_batch_size']} x {p['num_gpu_batches']} | "
          f"{'/'.join('%g' % x for x in p['percent'][:2])}/{100 - sum(p['percent'][:2]):g} | "
          f"{both('throughput_tokens_per_s')} | {med('throughput_tokens_per_s'):.4g} "
          f"({', '.join('%.4g' % r['throughput_tokens_per_s'] for r in rs) or 'no run'}) | "
          f"{both('prefill_s')} / {med('prefill_s'):.4g} | {both('decode_s')} / {med('decode_s'):.4g} |")
PY
