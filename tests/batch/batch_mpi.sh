#!/usr/bin/env bash
# batch_mpi.sh - a Batch API file (make_batch.py: 120 mixed requests, five
# malformed lines) under mpirun -np 2: rank 0 owns the requests' output, the
# last rank samples each row with its own settings, and the output is
# byte-identical to one process's over the same blocks (--num-gpu-batches
# 2 x K), exit 3 on both (some requests failed).
# Usage: batch_mpi.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
. "$here/../pipeline/mpi_env.sh"
rm -rf "$work" && mkdir -p "$work"
"$py" "$here/../ref/make_checkpoint.py" --out "$work/m" --layers 4 --hidden 32 --heads 2 --ffn 64 --vocab 600 \
  --max-pos 256 --seed 5 --std 0.6 --synth-vocab >/dev/null || exit 1
"$py" "$here/make_batch.py" "$work/b.jsonl" 120 --bad --max-pos 256 2>/dev/null || exit 1
printf '{%% for m in messages %%}<|{{ m.role }}|>{{ m.content }}\n{%% endfor %%}<|assistant|>' >"$work/chat.jinja"
common=(--model "$work/m" --prompts "$work/b.jsonl" --chat-template "$work/chat.jinja" --gpu-batch-size 4 --device host
        --percent 100 0 100 0 100 0)
"$flexgen" run "${common[@]}" --num-gpu-batches 4 --offload-dir "$work/off1" --out "$work/single.jsonl" 2>"$work/single.err"
rc=$?
[ $rc -eq 3 ] || { echo "FAIL single process: exit $rc: $(grep error: "$work/single.err")"; exit 1; }
timeout 300 mpirun -np 1 "$flexgen" run "${common[@]}" --num-gpu-batches 2 --offload-dir "$work/off-r0" --out "$work/mpi.jsonl" \
  : -np 1 "$flexgen" run "${common[@]}" --num-gpu-batches 2 --offload-dir "$work/off-r1" --out "$work/mpi.jsonl" \
  >"$work/mpi.log" 2>&1
rc=$?
[ $rc -eq 3 ] || { echo "FAIL mpirun -np 2: exit $rc: $(grep -m3 -E 'error|noticed' "$work/mpi.log")"; exit 1; }
cmp -s "$work/single.jsonl" "$work/mpi.jsonl" || { echo "FAIL mpirun -np 2: the output differs from one process's"; exit 1; }
good=$(grep -c '"error":null' "$work/mpi.jsonl")
[ "$good" -eq 120 ] || { echo "FAIL mpirun -np 2: $good of 120 good requests answered"; exit 1; }
echo "ok   mpirun -np 2: $(wc -l <"$work/mpi.jsonl") lines byte-identical to one process's"
