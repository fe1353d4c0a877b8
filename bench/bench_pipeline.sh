#!/usr/bin/env bash
# Pipeline scaling on this one host: mpirun -np P flexgen run for P = 1, 2, 3
# (P = 1 is a plain run) on a model whose weights are on disk (every rank:
# --percent 0 0 100 0 100 0), the same prompts, GPU batch and batches per
# group, runs interleaved, REPS each; medians of throughput, and from each
# run's report the pipeline's bubble (time a rank waits on the ring) and the
# ring's transfer time (sends posted to completed) per token step.
# One host shares one disk and its cores among the ranks, so this shows the
# pipeline's overheads, not its scaling across machines: for that,
# bench/bench_pipeline_t4.sh gives the cost model's prediction per machine count.
# Usage: bench/bench_pipeline.sh [MODEL (default opt-1.3b:12)] [REPS (default 3)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
flexgen=$root/build/bin/flexgen
py=/usr/bin/python3
model=${1:-opt-1.3b:12} reps=${2:-3}
command -v mpirun >/dev/null || { echo "bench_pipeline: needs mpirun (apt-get install openmpi-bin)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d /var/tmp/flexgen-pipe.XXXXXX)
trap 'rm -rf "$work"' EXIT
# 24 prompts of 32 tokens: 6 GPU batches of 4, whole blocks for P = 1, 2, 3
"$py" -c 'import json; print(json.dumps([[2] + [100 + 7 * i + j for j in range(31)] for i in range(24)]))' >"$work/p.json"
gen=8
args=(run --dummy "$model" --prompt-ids "$work/p.json" --gen-len $gen --ignore-eos --gpu-batch-size 4
      --num-gpu-batches 1 --percent 0 0 100 0 100 0 --device host --offload-dir "$work/off")
# the tier store once, outside the timing
"$flexgen" "${args[@]}" --gen-len 1 --out "$work/warm.jsonl" 2>/dev/null
for rep in $(seq "$reps"); do
  for P in 1 2 3; do
    if [ "$P" = 1 ]; then
      "$flexgen" "${args[@]}" --out "$work/o$P.jsonl" --report "$work/r$P-$rep.json" 2>"$work/log$P"
    else
      mpirun -np "$P" "$flexgen" "${args[@]}" --out "$work/o$P.jsonl" --report "$work/r$P-$rep.json" >"$work/log$P" 2>&1
    fi
    echo "rep $rep P=$P: $($py -c 'import json,sys; print("%.3f tokens/s" % json.load(open(sys.argv[1]))["throughput_tokens_per_s"])' "$work/r$P-$rep.json")" >&2
  done
  cmp -s "$work/o1.jsonl" "$work/o2.jsonl" && cmp -s "$work/o1.jsonl" "$work/o3.jsonl" \
    || { echo "bench_pipeline: the outputs of P = 1, 2, 3 differ" >&2; exit 1; }
done
"$py" - "$work" "$reps" "$gen" <<'PY'
import json, statistics, sys
work, reps, gen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print(f"{'P':>2} {'tokens/s':>9} {'vs P=1':>7} {'prefill s':>9} {'decode s':>9} {'bubble/step ms':>15} {'send/step ms':>13} {'MB/rank sent':>13}")
base = None
for P in (1, 2, 3):
    rs = [json.load(open(f"{work}/r{P}-{r}.json")) for r in range(1, reps + 1)]
    tp = statistics.median(r["throughput_tokens_per_s"] for r in rs)
    base = base or tp
    pre = statistics.median(r["prefill_s"] for r in rs)
    dec = statistics.median(r["decode_s"] for r in rs)
    steps = gen * 24 // (4 * P)   # token steps: gen per block, 24 / (4 P) blocks
    bub = snd = sent = 0.0
    if P > 1:
        per = [r["pipeline"]["per_rank"] for r in rs]
        bub = statistics.median(statistics.mean(x["ring_wait_s"] for x in p) for p in per) / steps * 1e3
        snd = statistics.median(statistics.mean(x["ring_send_s"] for x in p) for p in per) / steps * 1e3
        sent = statistics.median(statistics.mean(x["sent_bytes"] for x in p) for p in per) / 1e6
    print(f"{P:>2} {tp:9.3f} {tp / base:6.2f}x {pre:9.2f} {dec:9.2f} {bub:15.1f} {snd:13.2f} {sent:13.2f}")
print(f"(medians of {reps} interleaved runs; bubble: mean over ranks of the time blocked on the ring, per token "
      "step of a block; send: sends posted to seen complete, which includes the wait for the next rank to post "
      "its receive, so it is an upper bound of the transfer)")
PY
