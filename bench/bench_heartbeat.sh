#!/usr/bin/env bash
# Workers stay through a long coordinator step (issue 13): `flexgen run
# --dummy opt-13b` with its weights on the disk tier, started from an empty
# offload directory, so the coordinator converts the whole tier store (about
# 26 GB, a minute or more) while the workers wait. Before the supervisor's
# heartbeat thread every worker left after 10 s of silence and was
# restarted. Passes when the run ends well and its log shows no worker
# leaving, declared dead or restarted; prints the conversion's time (the
# report's weights load) beside that count.
# Needs about 26 GB free under OFFLOAD_DIR's file system and a quiet
# machine; not for CI (tests/engine/supervision.sh is the CI check, with a
# stall on a small model).
# Usage: [OFFLOAD_DIR=DIR] bench/bench_heartbeat.sh [MODEL] [GEN]   (build first: scripts/build.sh)
# Defaults: opt-13b, 2 tokens, 2 prompts of 8 tokens, gpu batch 2; weights
# 100% disk, KV cache and activations on the CPU tier.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-opt-13b} gen=${2:-2}
py=/usr/bin/python3
flexgen=$root/build/bin/flexgen
work=$(mktemp -d "${OFFLOAD_DIR:-/var/tmp}/flexgen-hb.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo '[[2, 100, 200, 300, 400, 500, 600, 700], [2, 11, 12, 13, 14, 15, 16, 17]]' >"$work/p.json"
echo "bench_heartbeat: --dummy $model, weights on disk, empty offload dir $work/off" \
     "($(df -h --output=avail "$work" | tail -1 | tr -d ' ') free), gen $gen"
t0=$(date +%s)
"$flexgen" run --dummy "$model" --prompt-ids "$work/p.json" --gen-len "$gen" --ignore-eos --gpu-batch-size 2 \
  --percent 0 0 0 100 0 100 --offload-dir "$work/off" --out "$work/out.jsonl" --report "$work/r.json" \
  2>"$work/log"
rc=$? t1=$(date +%s)
grep -E "tier store|generated" "$work/log" | sed 's/^/  /'
pattern='silence from the coordinator|no answer from the coordinator|declared dead|ready again|killed by|exited with|restarting'
n=$(grep -cE "$pattern" "$work/log")
load=$("$py" -c "import json,sys; print('%.1f' % json.load(open(sys.argv[1]))['load_s'])" "$work/r.json" 2>/dev/null || echo "?")
echo "  exit $rc after $((t1 - t0)) s; coordinator setup (tier-store conversion, weights) $load s;" \
     "worker departures or restarts in the log: $n"
if [ $rc -eq 0 ] && [ "$n" -eq 0 ]; then
  echo "bench_heartbeat: PASS"
else
  grep -E "$pattern|error" "$work/log" | head -10 | sed 's/^/  /'
  echo "bench_heartbeat: FAIL"
  exit 1
fi
