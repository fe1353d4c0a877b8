#!/usr/bin/env bash
# Two builds of this project, side by side on one machine: bench_offload.sh
# (block/row ratio, block throughput, process-split overhead) and
# bench_rtt.sh (command round trip, depth 1 and 8), run alternately ROUNDS
# times so that drift of the disk and the host hits both alike; prints each
# figure's median per build and the ratio new/old. For "no speed lost" checks
# of a change: build the old revision in a worktree first.
#   git worktree add /tmp/old REV && (cd /tmp/old && scripts/build.sh)
#   bench/bench_revs.sh /tmp/old . [ROUNDS] [K GEN PROMPT_LEN GBS]
# Defaults: 3 rounds, K 8, GEN 8, PROMPT_LEN 8, GBS 4 (~4 min a round on 2 cores).
set -euo pipefail
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd)
rounds=${3:-3} K=${4:-8} GEN=${5:-8} PLEN=${6:-8} GBS=${7:-4}
out=$(mktemp -d /var/tmp/flexgen-revs.XXXXXX)
trap 'rm -rf "$out"' EXIT
for tree in "$old" "$new"; do
  [ -x "$tree/build/bin/flexgen" ] || { echo "bench_revs.sh: $tree/build is not built (scripts/build.sh)" >&2; exit 2; }
done
for r in $(seq 1 "$rounds"); do
  # alternate which build goes first
  if [ $((r % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
  for which in $order; do
    tree=$old; [ "$which" = new ] && tree=$new
    echo "round $r/$rounds: $which ($tree)" >&2
    "$tree/bench/bench_offload.sh" "$K" "$GEN" "$PLEN" "$GBS" >"$out/offload-$which-$r.txt" 2>&1
    "$tree/bench/bench_rtt.sh" "$tree/build" 20000 >"$out/rtt-$which-$r.txt" 2>&1
  done
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def grab(path, pat, group=1):
    m = re.search(pat, open(path).read(), re.M)
    if not m: sys.exit(f"bench_revs.sh: no match for {pat!r} in {path}")
    return float(m.group(group))
figures = [
    ("block/row throughput ratio", "offload", r"^ratio block/row:\s+([\d.]+)x"),
    ("block throughput, tokens/s", "offload", r"^\s+block-1\s+([\d.]+) tokens/s"),
    ("row throughput, tokens/s", "offload", r"^\s+row-1\s+([\d.]+) tokens/s"),
    ("overhead of the process split, %", "offload", r"^overhead of the process split \(median of 5\): ([\d.]+)%"),
    ("round trip p50 depth 1, us", "rtt", r"^depth 1\s+n=\d+\s+p50\s+([\d.]+) us"),
    ("round trip p50 depth 8, us", "rtt", r"^depth 8\s+n=\d+\s+p50\s+([\d.]+) us"),
]
print(f"{'figure':36} {'old (median)':>14} {'new (median)':>14} {'new/old':>8}   per round old | new")
for name, kind, pat in figures:
    v = {w: [grab(f"{out}/{kind}-{w}-{r}.txt", pat) for r in range(1, rounds + 1)] for w in ("old", "new")}
    mo, mn = statistics.median(v["old"]), statistics.median(v["new"])
    per = " ".join(f"{x:g}" for x in v["old"]) + " | " + " ".join(f"{x:g}" for x in v["new"])
    print(f"{name:36} {mo:14.2f} {mn:14.2f} {mn / mo if mo else float('nan'):8.3f}   {per}")
PY
