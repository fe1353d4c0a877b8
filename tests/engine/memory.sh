#!/usr/bin/env bash
# Peak memory (issue 6): the report carries each process's peak RSS and the
# shared-memory total, and they stay within the budgets plus a fixed
# overhead: the gpu worker's arena + workspace (what --gpu-mem bounds) is at
# most --gpu-mem; the shared memory at most --cpu-mem; and each process's
# peak RSS at most its private memory (the gpu worker's arena + workspace)
# plus the shared memory it maps plus FIXED (code, libraries, thread stacks,
# per-thread kernel scratch, the coordinator's JSON and tokenizer).
# Usage: memory.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
"$py" -c 'import json; print(json.dumps([[2] + list(range(10, 10 + n)) for n in (5, 17, 30, 9)]))' >"$work/p.json"
"$flexgen" run --dummy opt-125m --prompt-ids "$work/p.json" --gen-len 8 --gpu-batch-size 2 --num-gpu-batches 2 \
  --percent 40 40 50 30 100 0 --cpu-cache-compute --gpu-mem 300M --cpu-mem 600M --disk-mem 1G \
  --offload-dir "$work/off" --out "$work/o.jsonl" --report "$work/r.json" 2>"$work/err" \
  || { echo "FAIL: run: $(grep error: "$work/err")"; exit 1; }
"$py" - "$work/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
MiB = 1 << 20
FIXED = 96 * MiB
gpu_mem, cpu_mem = 300 * MiB, 600 * MiB
rss = r["peak_rss_bytes"]
checks = [
    ("gpu arena + workspace <= --gpu-mem", r["peak_gpu_bytes"], gpu_mem),
    ("shared memory <= --cpu-mem", r["shm_bytes"], cpu_mem),
    ("gpu worker RSS <= arena + workspace + shm + fixed", rss["gpu"], r["peak_gpu_bytes"] + r["shm_bytes"] + FIXED),
    ("cpu worker RSS <= shm + fixed", rss["cpu"], r["shm_bytes"] + FIXED),
    ("disk worker RSS <= shm + fixed", rss["disk"], r["shm_bytes"] + FIXED),
    ("coordinator RSS <= shm + fixed", rss["coordinator"], r["shm_bytes"] + FIXED),
]
bad = 0
for what, have, limit in checks:
    ok = 0 < have <= limit
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {have / MiB:.1f} MiB <= {limit / MiB:.1f} MiB")
sys.exit(1 if bad else 0)
PY
rc=$?
[ $rc -eq 0 ] && rm -rf "$work"
exit $rc
