#!/usr/bin/env bash
# A new user's first runs, from an empty profile cache and offload
# directory: the seconds from `flexgen run` to its end (an upper bound on
# the time to the first generated token) and how much of them went to
# measuring the machine, for
#   1. --dummy opt-125m with no budgets (everything fits: no profile),
#   2. the same with --gpu-mem 200M --cpu-mem 200M (the CPU cannot hold the
#      weights: the disk is measured, its test file sized to the store),
#   3. --dummy opt-1.3b with --gpu-mem 1G --cpu-mem 4G after them (offloaded
#      to the CPU: the cached profile serves it, nothing is measured),
#   4. --dummy opt-1.3b with --gpu-mem 1G --cpu-mem 2G (its 2.6 GB store
#      goes partly to disk: the disk is measured again, sized to it).
# Usage: bench/bench_first_run.sh [GEN_LEN]   (build first; 8 by default)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
flexgen=$root/build/bin/flexgen
gen=${1:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache
"$root/scripts/fetch-gpt2-vocab.sh"
run() {   # NAME, flexgen run flags
  local name=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  "$flexgen" run --prompts "$root/scripts/sample-prompts.txt" --gen-len "$gen" --offload-dir "$work/off" \
    --out "$work/$name.jsonl" "$@" 2>"$work/$name.log" || { echo "$name: failed: $(tail -1 "$work/$name.log")"; exit 1; }
  t1=$(date +%s.%N)
  /usr/bin/python3 - "$name" "$t0" "$t1" "$work/$name.log" <<'PY'
import re, sys
name, t0, t1, log = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), open(sys.argv[4]).read()
steps = re.findall(r"profile \[\d+/\d+\]: ([^(]*)", log)
pol = re.search(r"policy auto[^:]*: (.*)", log)
print(f"{name}: {t1 - t0:.1f} s in all; measured: {', '.join(s.strip() for s in steps) or 'nothing'}")
print(f"    policy: {pol.group(1)[:150] if pol else '?'}")
PY
}
run opt125m-fits --dummy opt-125m
run opt125m-disk --dummy opt-125m --gpu-mem 200M --cpu-mem 200M
run opt1.3b-cpu --dummy opt-1.3b --gpu-mem 1G --cpu-mem 4G
run opt1.3b-disk --dummy opt-1.3b --gpu-mem 1G --cpu-mem 2G
