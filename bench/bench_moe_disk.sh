#!/usr/bin/env bash
# A mixture of experts larger than memory, from disk, under --policy auto
# (issue 35, must show 5): --dummy qwen3-30b-a3b (48 layers, 128 experts of
# 768, top 8; 61 GB in fp16, more than this machine's memory) with the
# weights that do not fit the budgets on disk, in one sitting:
#   1. the machine's limits: the disk's read rate (flexgen-disk-bench, a file
#      larger than the page cache can hold at once) and the memory's;
#   2. flexgen policy: what the LP places where (the dense part and the
#      experts apart), how the experts load, predicted prefill and decode;
#   3. flexgen run --policy auto with the same budgets, twice: the first
#      (2 new tokens) converts the tier store and keeps the rate its decode
#      read the store at in this machine's profile (disk.stream: the test
#      file of step 1 and of the profile is one the host's caches partly
#      hold); the second, measured prefill and decode beside the prediction
#      the run itself logged (--report's "predicted"), the ratio per phase,
#      the disk's delivered rate, and the run's weight_loads (bytes moved
#      per token, experts loaded and routed);
#   4. the FlexGen T4 preset on mixtral-8x7b shapes with MoE-Lightning's
#      setup (one 16 GB T4, 200 GB of CPU memory): the policy and the
#      throughput the cost model predicts, to set beside that paper's and
#      FlexGen's figures.
# Needs ~65 GB free in OFFLOAD (the tier store holds the whole model).
# Usage: [LAYERS=48] [PROMPTS=32] [GEN=4] [GPU_MEM=6G] [CPU_MEM=14G] [OFFLOAD=/var/tmp/fg-moe-disk]
#        bench/bench_moe_disk.sh   (build first)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
layers=${LAYERS:-48} n=${PROMPTS:-32} gen=${GEN:-4} gmem=${GPU_MEM:-6G} cmem=${CPU_MEM:-14G}
off=${OFFLOAD:-/var/tmp/fg-moe-disk}
model=qwen3-30b-a3b
[ "$layers" != 48 ] && model="qwen3-30b-a3b:$layers"
mkdir -p "$off"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "bench_moe_disk: $(date -u +%FT%TZ), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model --dummy $model, $n prompts of 16 tokens, $gen new tokens, --gpu-mem $gmem --cpu-mem $cmem, offload $off"
echo "free in $off: $(df -h "$off" | awk 'NR == 2 {print $4}')"

echo "== 1. the machine's limits"
"$bin/flexgen-fmt-bench" --out 2048 --in 2048 --rows 1 --formats F16 2>/dev/null | grep -E "^machine"
"$bin/flexgen-disk-bench" write --file "$off/disk-test.bin" --size 8G 2>&1 | grep -E "_GBps=|direct="| tr '\n' ' '; echo
"$bin/flexgen-disk-bench" read --file "$off/disk-test.bin" 2>&1 | grep -E "_GBps=|direct=" | tr '\n' ' '; echo   # O_DIRECT: the page cache out of it
rm -f "$off/disk-test.bin"
/usr/bin/python3 -c 'import json, random; r = random.Random(1)
print(json.dumps([[1] + [r.randrange(10, 150000) for _ in range(15)] for _ in range('"$n"')]))' >"$work/p.json"
common=(--dummy "$model" --gpu-mem "$gmem" --cpu-mem "$cmem" --offload-dir "$off" --device host)

echo "== 2. flexgen policy (the LP's placement)"
"$bin/flexgen" policy "${common[@]}" --gen-len "$gen" --prompt-ids "$work/p.json" 2>"$work/policy.err" | grep -E "^policy|^predicted|^memory|^search|weights .* per layer"
grep -E "error" "$work/policy.err"

# run_auto LABEL GEN: flexgen run --policy auto, its prediction against what it measured
run_auto() {
  local t0
  t0=$(date +%s)
  "$bin/flexgen" run "${common[@]}" --gen-len "$2" --prompt-ids "$work/p.json" --ignore-eos \
    --out "$work/out.jsonl" --report "$work/report.json" 2>"$work/run.err" || { tail -5 "$work/run.err"; exit 1; }
  echo "  [$1] wall $(( $(date +%s) - t0 )) s (with the tier store's conversion and the first profile, if any)"
  grep -E "policy auto|weight bytes|profile: the disk" "$work/run.err" | sed 's/^.*info: /  /'
  /usr/bin/python3 - "$work/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = r.get("predicted", {})
print("  policy: %s" % r["policy"])
for ph in ("prefill_s", "decode_s"):
    m, q = r[ph], p.get(ph, 0)
    print("  %-8s measured %8.2f s, predicted %8.2f s: predicted / measured %.2f" % (ph[:-2], m, q, q / m if m else 0))
print("  throughput %.3f tokens/s (predicted %.3f)" % (r["throughput_tokens_per_s"], p.get("throughput_tokens_per_s", 0)))
for ph in ("prefill", "decode"):
    print("  %-8s predicted resource seconds: %s" % (ph, ", ".join("%s %.1f" % kv for kv in p.get(ph + "_resource_s", {}).items())))
d = r["disk_reads"]
print("  disk read %.2f GB, h2d %.2f GB over the run; the disk delivered %.2f GB/s in prefill, %.2f GB/s in decode"
      % (r["disk_read_bytes"] / 1e9, r["h2d_bytes"] / 1e9, d["prefill"]["GBps"], d["decode"]["GBps"]))
w = r.get("weight_loads")
if w:
    for s in w["per_token"]:
        print("  token %d: dense %.2f GB, experts %.2f GB (%.2f GB from disk), %d experts loaded, %d routed"
              % (s["token"], s["dense_bytes"] / 1e9, s["expert_bytes"] / 1e9, s["expert_disk_bytes"] / 1e9,
                 s["experts"], s["routed_experts"]))
PY
}
echo "== 3. flexgen run --policy auto, twice: the first converts the tier store and keeps the rate its decode"
echo "   read the store at in the profile (disk.stream); the second is predicted with it"
run_auto first 2
run_auto second "$gen"

echo "== 4. the FlexGen T4 preset on mixtral-8x7b (MoE-Lightning's setup: one 16 GB T4, 200 GB CPU memory)"
for len in "--prompt-len 512 --gen-len 32" "--prompt-len 128 --gen-len 128"; do
  # shellcheck disable=SC2086
  "$bin/flexgen" policy --dummy mixtral-8x7b $len --hardware flexgen-t4 --gpu-mem 16G --cpu-mem 200G \
    --offload-dir "$off" 2>/dev/null | grep -E "^policy|^predicted" | sed "s/^/  [$len] /"
done
