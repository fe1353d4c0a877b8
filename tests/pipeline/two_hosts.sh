#!/usr/bin/env bash
# The pipeline across two "hosts": scripts/mpi-two-hosts.sh puts rank 0 and
# rank 1 in two network namespaces of this machine joined by a veth pair
# (own hostname, own /dev/shm, MPI over TCP between them, no shared memory).
# flexgen run completes with the output of a single-process run byte for
# byte, the report shows the bytes each rank sent, and the veth counters
# show at least those bytes crossed. Skips (77) where namespaces cannot be
# made (not root, a sandbox without them).
# Usage: two_hosts.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
harness=$here/../../scripts/mpi-two-hosts.sh
py=${FG_PYTHON:-/usr/bin/python3}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
for t in ip mpirun unshare; do command -v $t >/dev/null || { echo "SKIP: no $t"; exit 77; }; done
unshare --net true 2>/dev/null || { echo "SKIP: no network namespaces here"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
"$py" "$here/../ref/make_checkpoint.py" --out "$work/m" --layers 4 --hidden 64 --heads 4 --ffn 160 --vocab 500 \
  --max-pos 96 --seed 8 >/dev/null || exit 1
"$py" -c 'import json; print(json.dumps([[2] + [11 + 5 * i + j for j in range(3 + i % 5)] for i in range(8)]))' >"$work/p.json"
common=(--model "$work/m" --prompt-ids "$work/p.json" --gen-len 6 --ignore-eos --gpu-batch-size 2 --device host
        --percent 0 50 0 100 0 100 --cpu-cache-compute)
"$flexgen" run "${common[@]}" --num-gpu-batches 2 --offload-dir "$work/off-s" --out "$work/single.jsonl" \
  2>"$work/single.err" || { echo "FAIL: single-process run: $(grep error "$work/single.err")"; exit 1; }
two() {
  rm -f "$work/two.jsonl" "$work/two.report.json"
  (cd "$work" && "$harness" run -- "$flexgen" run "${common[@]}" --num-gpu-batches 1 --offload-dir "$work/off" \
     --out "$work/two.jsonl" --report "$work/two.report.json") >"$work/two.log" 2>&1
}
two
rc=$?
# OpenMPI 4 now and then calls a rank that finished "exiting improperly"
# (tests/mpi/two-hosts-probe.sh): with the output whole, run once more
if [ $rc -ne 0 ] && grep -q 'exiting improperly' "$work/two.log" && [ -e "$work/two.jsonl" ]; then
  echo "NOTE: OpenMPI's spurious 'exiting improperly' after the run; running once more"
  two
  rc=$?
fi
[ $rc -eq 0 ] || { echo "FAIL: the two-host run exited $rc: $(grep -m3 -E 'error|noticed' "$work/two.log")"; exit 1; }
grep -q "coordinator rank 1/2" "$work/two.log" || { echo "FAIL: no rank 1 in the log"; exit 1; }
cmp -s "$work/single.jsonl" "$work/two.jsonl" || { echo "FAIL: the output differs from the single-process run's"; exit 1; }
"$py" - "$work/two.report.json" "$work/two.log" <<'PY' || exit 1
import json, re, sys
ranks = json.load(open(sys.argv[1]))["pipeline"]["per_rank"]
log = open(sys.argv[2]).read()
c = {m.group(1): (int(m.group(2)), int(m.group(3)))
     for m in re.finditer(r"counters (\S+?)/\S+ tx_bytes=(\d+) rx_bytes=(\d+)", log)}
h0 = next(v for k, v in c.items() if k.endswith("-h0"))
h1 = next(v for k, v in c.items() if k.endswith("-h1"))
s0, s1 = ranks[0]["sent_bytes"], ranks[1]["sent_bytes"]
print(f"rank 0 sent {s0} bytes, rank 1 sent {s1}; veth h0 tx {h0[0]} rx {h0[1]}, h1 tx {h1[0]} rx {h1[1]}")
if not (s0 > 0 and s1 > 0 and h0[0] >= s0 and h1[1] >= s0 and h1[0] >= s1 and h0[1] >= s1):
    print("FAIL: the ranks' bytes did not all cross the veth"); sys.exit(1)
PY
echo "ok   two hosts: ranks in two network namespaces, MPI over TCP across the veth; output byte-identical to one process"
