#!/usr/bin/env bash
# The pipeline's output is byte-identical to one process's: mpirun -np P
# (P = 2, 3; ranks oversubscribed on this host) with a different policy on
# every rank (mpirun's "A : B" form): weights on disk, CPU attention over a
# CPU cache, activations and cache on disk, 4-bit weights, the row
# schedule, sampling; an OPT and a Llama (GQA) checkpoint. Each pipeline's
# tokens equal the single-process run over the same batches (gbs B, P x K
# batches per block) and the reference engine's.
# Usage: pipeline.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
ref=$here/../ref
py=${FG_PYTHON:-/usr/bin/python3}
. "$here/mpi_env.sh"
rm -rf "$work" && mkdir -p "$work"
"$py" "$ref/make_checkpoint.py" --out "$work/opt" --layers 6 --hidden 64 --heads 4 --ffn 160 --vocab 500 \
  --max-pos 96 --seed 21 >/dev/null || exit 1
"$py" "$ref/make_llama_checkpoint.py" --out "$work/llama" --layers 6 --hidden 64 --heads 8 --kv-heads 2 \
  --ffn 160 --vocab 500 --max-pos 96 --seed 5 >/dev/null || exit 1
# 11 prompts of lengths 2..12: a partial last block, every batch left-padded
"$py" -c 'import json, random; r = random.Random(3)
print(json.dumps([[2] + [r.randrange(4, 500) for _ in range(1 + (7 * i) % 11)] for i in range(11)]))' >"$work/p.json"
fails=0
ids() { grep -o '"output_ids":\[[0-9,]*\]' "$1"; }
# case: NAME MODEL P K "EXTRA (all ranks)" "RANK 0 POLICY" "RANK 1 POLICY" ...
check() {
  local name=$1 model=$2 P=$3 K=$4 extra=$5
  shift 5
  local common=(--model "$work/$model" --prompt-ids "$work/p.json" --gen-len 5 --ignore-eos --gpu-batch-size 2
                --device host)
  # shellcheck disable=SC2206
  local ex=($extra)
  if [ ! -e "$work/$model-ref-$name.jsonl" ]; then
    "$flexgen" run --engine reference "${common[@]}" "${ex[@]}" --out "$work/$model-ref-$name.jsonl" \
      2>"$work/$name.ref.err" || { echo "FAIL $name: reference run: $(grep error: "$work/$name.ref.err")"; fails=$((fails + 1)); return; }
  fi
  "$flexgen" run "${common[@]}" "${ex[@]}" --percent 100 0 100 0 100 0 --num-gpu-batches $((P * K)) \
    --offload-dir "$work/off-single" --out "$work/$name.single.jsonl" 2>"$work/$name.single.err" \
    || { echo "FAIL $name: single-process run: $(grep error: "$work/$name.single.err")"; fails=$((fails + 1)); return; }
  local line=() r=0
  for pol in "$@"; do
    [ $r -gt 0 ] && line+=(:)
    # shellcheck disable=SC2206
    line+=(-np 1 "$flexgen" run "${common[@]}" "${ex[@]}" $pol --num-gpu-batches "$K" --offload-dir "$work/off-r$r"
           --out "$work/$name.jsonl" --report "$work/$name.report.json")
    r=$((r + 1))
  done
  if ! timeout 300 mpirun "${line[@]}" >"$work/$name.log" 2>&1; then
    echo "FAIL $name: mpirun: $(grep -m3 -E 'error|noticed' "$work/$name.log")"; fails=$((fails + 1)); return
  fi
  if ! cmp -s "$work/$name.single.jsonl" "$work/$name.jsonl"; then
    echo "FAIL $name: the output differs from the single-process run's"; fails=$((fails + 1)); return
  fi
  if ! diff -q <(ids "$work/$model-ref-$name.jsonl") <(ids "$work/$name.jsonl") >/dev/null; then
    echo "FAIL $name: tokens differ from the reference engine's"; fails=$((fails + 1)); return
  fi
  # the report: P ranks, each with its layers and the bytes it moved
  if ! "$py" - "$work/$name.report.json" "$P" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); P = int(sys.argv[2])
ranks = r["pipeline"]["per_rank"]
assert len(ranks) == P, ranks
assert ranks[0]["layers"][0] == 0 and ranks[-1]["layers"][1] == 6, ranks
assert all(a["layers"][1] == b["layers"][0] for a, b in zip(ranks, ranks[1:])), ranks
assert all(x["sent_bytes"] > 0 and x["received_bytes"] > 0 for x in ranks), ranks
assert r["generated_tokens"] == 55, r["generated_tokens"]
PY
  then echo "FAIL $name: the report's pipeline section"; fails=$((fails + 1)); return; fi
  echo "ok   $name: P=$P, byte-identical to one process and to the reference engine"
}
check p2-disk-cpuattn opt 2 1 "" "--percent 0 0 100 0 100 0" "--percent 50 50 0 100 0 100 --cpu-cache-compute"
check p3-mixed opt 3 2 "" "--percent 100 0 100 0 100 0" \
  "--percent 0 0 0 100 0 100 --cpu-cache-compute" "--percent 30 30 0 0 0 0"
check p2-row-sampled opt 2 2 "--temperature 0.8 --top-p 0.9 --seed 7" "--percent 20 80 0 100 0 100 --schedule row" \
  "--percent 0 100 50 50 100 0 --schedule row --no-overlap"
check p3-llama-gqa llama 3 1 "" "--percent 0 100 0 100 0 100 --cpu-cache-compute" \
  "--percent 0 0 100 0 100 0" "--percent 50 0 0 100 100 0 --cpu-cache-compute"
# what a pipeline cannot do is refused on every rank, exit 2, before work
timeout 120 mpirun -np 2 "$flexgen" run --model "$work/opt" --prompt-ids "$work/p.json" --gen-len 5 \
  --engine reference --out "$work/bad.jsonl" >"$work/bad.log" 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q "only the flexgen engine runs as a pipeline" "$work/bad.log" || [ -e "$work/bad.jsonl" ]; then
  echo "FAIL refused: exit $rc: $(grep -m2 error "$work/bad.log")"; fails=$((fails + 1))
else
  echo "ok   refused: --engine reference under mpirun, exit 2 with the reason"
fi
[ $fails -eq 0 ] && echo "all pipeline cases passed" || echo "$fails failed"
[ $fails -eq 0 ]
