#!/usr/bin/env bash
# A Llama model larger than this machine's memory, from disk (issue 26, must
# show 5): `flexgen run --dummy llama-2-13b` (26 GB of fp16 weights; the
# machine has 24 GiB) under --policy auto with realistic budgets, so the
# search puts most weights on the disk tier. Prints, per phase, the
# measured seconds (the run's --report) beside the cost model's prediction
# (the report's "predicted", from this machine's cached profile, measured
# by the run itself where it lacks the llama-2-13b layer shape or a disk
# figure) and their ratio; the disk's read rate as the profile measured it
# (the disk worker's own request size and depth, the rate the cost model
# reads) and, with FIO=1, fio's sequential O_DIRECT read of a file as large
# as the memory; and decode's effective rate: the weights' bytes per token
# (all of them, and the part read from disk) over the seconds per decode
# token, as a share of the disk's rate ("at the disk's speed").
#
# Needs about 27 GB free under OFFLOAD_DIR (default /var/tmp: a real disk,
# not tmpfs); the tier store and everything else go in a scratch directory
# removed at exit. Minutes: the store's conversion (26 GB written), a
# profile where none is cached (the gpu tier at the layer shape, the disk
# with an 8 GiB test file), a prefill and GEN - 1 decode tokens, each
# streaming the disk's share of the weights. Not for CI.
# Usage: [OFFLOAD_DIR=DIR] [GPU_MEM=2G] [CPU_MEM=6G] [PROMPTS=4] [PROMPT_LEN=32]
#        [GEN=6] [FIO=0] bench/bench_llama13b_disk.sh        (build first)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
flexgen=$root/build/bin/flexgen
model=llama-2-13b
gpu_mem=${GPU_MEM:-2G} cpu_mem=${CPU_MEM:-6G}
prompts=${PROMPTS:-4} plen=${PROMPT_LEN:-32} gen=${GEN:-6}
base=${OFFLOAD_DIR:-/var/tmp}
work=$(mktemp -d "$base/flexgen-l13.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
"$py" -c 'import json, random, sys
n, s = int(sys.argv[1]), int(sys.argv[2]); r = random.Random(26)
print(json.dumps([[1] + [r.randrange(100, 32000) for _ in range(s - 1)] for _ in range(n)]))' \
  "$prompts" "$plen" >"$work/p.json"
echo "bench_llama13b_disk: --dummy $model, $prompts prompts x $plen tokens, $gen new, --policy auto" \
     "--gpu-mem $gpu_mem --cpu-mem $cpu_mem; offload dir $work/off ($(df -h --output=avail "$work" | tail -1 | tr -d ' ') free)"
t0=$(date +%s)
"$flexgen" run --dummy "$model" --prompt-ids "$work/p.json" --gen-len "$gen" --ignore-eos --policy auto \
  --gpu-mem "$gpu_mem" --cpu-mem "$cpu_mem" --offload-dir "$work/off" --out "$work/out.jsonl" \
  --report "$work/r.json" --trace "$work/trace.json" 2>"$work/log"
rc=$? t1=$(date +%s)
grep -E "policy auto|profile \[|measured layer shape|tier store|generated" "$work/log" | sed 's/^/  /'
if [ $rc -ne 0 ]; then
  grep -E "error" "$work/log" | tail -5 | sed 's/^/  /'
  echo "bench_llama13b_disk: the run failed (exit $rc)"
  exit 1
fi
profile=$(grep -oE "cached in [^;]*\.json|policy auto \([^)]*\.json" "$work/log" | grep -oE "/[^ ;()]*\.json" | head -1)
[ -n "$profile" ] || profile=$(ls -t "${XDG_CACHE_HOME:-$HOME/.cache}"/flexgen/profile-*.json 2>/dev/null | head -1)
fio_gbps=""
if [ "${FIO:-0}" = 1 ] && command -v fio >/dev/null; then
  # a file as large as the memory, so no cache of the host's holds it, laid out and synced first (read
  # right after its writing, the writeback took the disk: 0.28 GB/s); 1 MiB requests 128 deep, the
  # disk worker's own (4 executors x 32)
  fargs=(--name=seqread --filename="$work/fio.dat" --size="$(free -b | awk '/Mem:/ {print $2}')" --rw=read
         --bs=1M --direct=1 --ioengine=libaio --iodepth=128)
  fio "${fargs[@]}" --create_only=1 >/dev/null 2>&1 && sync
  fio_gbps=$(fio "${fargs[@]}" --output-format=json 2>/dev/null |
    "$py" -c 'import json, sys; print(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"] / 1e9)')
  rm -f "$work/fio.dat"
fi
echo "  whole run: $((t1 - t0)) s (store conversion, any profiling, generation)"
"$py" "$root/bench/trace_stats.py" "$work/trace.json" --skip-prefill >"$work/ts.json" 2>/dev/null || true
"$py" - "$work/r.json" "$profile" "$model" "$fio_gbps" "$work/ts.json" <<'EOF'
import json, os, sys
r = json.load(open(sys.argv[1]))
prof = json.load(open(sys.argv[2])) if sys.argv[2] and os.path.exists(sys.argv[2]) else {}
model, fio = sys.argv[3], sys.argv[4]
p = r.get("predicted", {})
n, gen = r["prompts"], r["gen_len"]
print("  policy: %s" % r.get("policy"))
print("  %-8s %12s %12s %8s" % ("phase", "measured s", "predicted s", "ratio"))
for ph in ("prefill", "decode"):
    m, q = r[ph + "_s"], p.get(ph + "_s", 0)
    print("  %-8s %12.2f %12.2f %8.3f   (predicted bottleneck: %s)" % (ph, m, q, m / q if q else float("nan"),
          p.get(ph + "_bottleneck", "?")))
print("  throughput: measured %.4f tokens/s, predicted %.4f" % (r["throughput_tokens_per_s"],
                                                              p.get("throughput_tokens_per_s", 0)))
disk = prof.get("disk", {})
rate = disk.get("engine_read_GBps") or disk.get("disk_read_GBps")
print("  disk read rate: %.3f GB/s (the profile's, at the disk worker's request size and depth, %.2f GB test file)"
      % (rate or 0, disk.get("file_bytes", 0) / 1e9) + ("; best setting %.3f GB/s" % disk["disk_read_GBps"]
                                                         if "disk_read_GBps" in disk else ""))
if fio:
    print("  fio sequential O_DIRECT read, 1 MiB x 128 deep, a file as large as the memory: %.3f GB/s" % float(fio))
# the report's disk reads split per weight pass: the prefill reads the disk's share once, each decode
# token once (one block of prompts; the cache and activations stay off the disk under these budgets)
steps = gen - 1
dec_tok_s = r["decode_s"] / steps if steps else float("nan")
wbytes = 26031728640   # llama-2-13b: 13,015,864,320 parameters x 2 bytes
disk_per_pass = r["disk_read_bytes"] / (steps + 1)  # prefill and each decode token read the same weights
print("  decode: %.2f s per token (%d prompts a step); disk read %.2f GB per weight pass (%.1f%% of the %.2f GB "
      "of weights)" % (dec_tok_s, n, disk_per_pass / 1e9, 100 * disk_per_pass / wbytes, wbytes / 1e9))
eff_all, eff_disk = wbytes / dec_tok_s / 1e9, disk_per_pass / dec_tok_s / 1e9
print("  effective rate in decode: all weights %.3f GB/s, their disk part %.3f GB/s = %.2f of the disk's %.3f GB/s"
      % (eff_all, eff_disk, eff_disk / rate if rate else float("nan"), rate or 0))
if fio:
    print("  (%.2f of fio's)" % (eff_disk / float(fio)))
try:
    ts = json.load(open(sys.argv[5]))
    print("  trace (decode): %s" % json.dumps({k: v for k, v in ts.items() if not isinstance(v, (list, dict))}))
except Exception:
    pass
EOF
