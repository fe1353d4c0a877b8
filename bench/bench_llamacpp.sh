#!/usr/bin/env bash
# This engine beside llama.cpp on this machine (issue 26, must show 6): the
# same GGUF file of random F16 weights (bench/gguf_random.py), the same
# prompts as token ids (BOS first), the same number of new tokens (greedy,
# EOS ignored), in one sitting, the two engines interleaved (ours, theirs,
# ours, theirs, ...; REPS of each), at 1 prompt and at 32:
#   a  tinyllama-1.1b's shapes (2.2 GB): fits in memory. Ours: --policy auto
#      with no budgets (everything in the gpu worker's arena, on the host
#      backend).
#   b  llama-2-13b's shapes (26 GB): larger than this machine's 24 GiB. Ours:
#      --policy auto with --gpu-mem GPU_MEM --cpu-mem CPU_MEM (default 4G and
#      12G: two thirds of the memory), the rest streamed from the tier store
#      with O_DIRECT; llama.cpp mmaps the file and reads what the page cache
#      does not hold.
# llama.cpp is node-llama-cpp 3.21.1's prebuilt CPU build
# (scripts/fetch-llamacpp.sh, cached in ~/.cache/flexgen/llamacpp), driven
# by bench/llamacpp_bench.mjs: 2 threads (its default would be 4 on these 2
# cores), mmap without mlock, all prompts as parallel sequences of one
# context (one llama_decode batch per step), a batch size of all the
# prompts' tokens.
# Tokens/s = generated tokens / generation time. Ours: the run's report,
# prefill_s + decode_s (from the first embedding to the last token; not the
# weights' load or the tier store's conversion). llama.cpp: from the first
# prompt token submitted to the last new token returned (prefill and decode;
# not the model's load or the context's creation). Medians over the REPS.
# Disk: case b needs about 53 GB free under OFFLOAD_DIR (the GGUF and our
# tier store); both are removed at exit. Not for CI.
#   c  llama-2-70b's shapes, LAYERS of its 80 layers (bench/bench_quant.sh:
#      Q4_K_M, 48 layers, 25 GB: larger than memory, and with our tier store
#      beside it within this disk), as b.
# MIX: the weights' format (gguf_random.py --mix: F16, Q8_0, q4_k_m, ...).
# NOREPACK=1: llama.cpp as with its --no-repack (bench/llamacpp_norepack.c,
# LD_PRELOAD): its weights stay in the mmapped file instead of a repacked
# copy in anonymous memory, which a model larger than memory cannot hold
# (case c at 32 prompts was OOM-killed with it).
# Usage: [REPS=3] [NOREPACK=1] [OFFLOAD_DIR=/var/tmp] [PROMPT_LEN=32 GEN=32] [PROMPT_LEN_B=8 GEN_B=4]
#        [GPU_MEM=4G CPU_MEM=12G] [PROMPT_COUNTS="1 32"] [MIX=F16] [LAYERS=N]
#        bench/bench_llamacpp.sh [a|b|c|ab...]   (build first)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
flexgen=$root/build/bin/flexgen
cases=${1:-ab}
reps=${REPS:-3}
counts=${PROMPT_COUNTS:-1 32}
lib=$("$root/scripts/fetch-llamacpp.sh") || { echo "bench_llamacpp: llama.cpp cannot be installed here"; exit 1; }
work=$(mktemp -d "${OFFLOAD_DIR:-/var/tmp}/flexgen-lcpp.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
res=$work/results.jsonl
: >"$res"
pre=
if [ "${NOREPACK:-0}" = 1 ]; then
  pre=$("$root/bench/llamacpp_norepack.sh" "$lib" "$work") || exit 1
fi

prompts() {   # N LEN FILE: N prompts of LEN ids, BOS (1) first
  "$py" -c 'import json, random, sys
n, s = int(sys.argv[1]), int(sys.argv[2]); r = random.Random(6)
print(json.dumps([[1] + [r.randrange(259, 32000) for _ in range(s - 1)] for _ in range(n)]))' "$1" "$2" >"$3"
}

ours() {   # CASE N GEN P.json GGUF flags...
  local c=$1 n=$2 gen=$3 p=$4 gguf=$5
  shift 5
  local t0
  t0=$(date +%s.%N)
  "$flexgen" run --model "$gguf" --prompt-ids "$p" --gen-len "$gen" --ignore-eos --policy auto \
    --offload-dir "$work/off" --out "$work/out.jsonl" --report "$work/r.json" "$@" 2>"$work/ours.log" ||
    { grep error "$work/ours.log" | tail -3; return 1; }
  "$py" -c 'import json, os, sys
r = json.load(open(sys.argv[1])); toks = [o["output_ids"] for o in sorted((json.loads(l) for l in open(sys.argv[2])), key=lambda o: o["id"])]
print(json.dumps({"case": sys.argv[3], "prompts": int(sys.argv[4]), "engine": "ours",
                  "tokens_per_s": r["throughput_tokens_per_s"], "gen_s": r["prefill_s"] + r["decode_s"],
                  "prefill_s": r["prefill_s"], "decode_s": r["decode_s"], "generated": r["generated_tokens"],
                  "wall_s": float(sys.argv[5]), "policy": r.get("policy"), "model_bytes": os.path.getsize(sys.argv[6]),
                  "disk_read_bytes": r.get("disk_read_bytes"), "tokens": toks}))' \
    "$work/r.json" "$work/out.jsonl" "$c" "$n" "$(echo "$(date +%s.%N) - $t0" | bc)" "$gguf" >>"$res"
  grep -E "policy auto|profile \[" "$work/ours.log" | head -2 | sed 's/^/    /'
}

theirs() {   # CASE N GEN P.json GGUF
  LD_PRELOAD=$pre node "$root/bench/llamacpp_bench.mjs" --lib "$lib" --model "$5" --prompt-ids "$4" --gen-len "$3" \
    --threads 2 >"$work/theirs.json" 2>"$work/theirs.log" || { tail -3 "$work/theirs.log"; return 1; }
  "$py" -c 'import json, sys
r = json.load(open(sys.argv[1]))
r.update(case=sys.argv[2], prompts=int(sys.argv[3]), engine="llama.cpp", generated=r["generated_tokens"])
print(json.dumps(r))' "$work/theirs.json" "$1" "$2" >>"$res"
}

last() { tail -1 "$res" | "$py" -c 'import json, sys; r = json.load(sys.stdin)
print("  %-9s %-2s prompts: %8.3f tokens/s (%d tokens in %.2f s; prefill %.2f s)" % (r["engine"], r["prompts"],
      r["tokens_per_s"], r["generated"], r["gen_s"], r["prefill_s"]))'; }

run_case() {   # CASE SIZE PROMPT_LEN GEN flags...
  local c=$1 size=$2 plen=$3 gen=$4
  shift 4
  local gguf=$work/$size.gguf t0
  t0=$(date +%s)
  "$py" "$root/bench/gguf_random.py" --size "$size" --out "$gguf" --mix "${MIX:-F16}" ${LAYERS:+--layers "$LAYERS"} |
    sed 's/^/  /' || return 1
  echo "  written in $(($(date +%s) - t0)) s ($(df -h --output=avail "$work" | tail -1 | tr -d ' ') free)"
  for n in $counts; do
    prompts "$n" "$plen" "$work/p$n.json"
    for r in $(seq "$reps"); do
      echo "  $c, $n prompts x $plen tokens, $gen new, round $r/$reps"
      ours "$c" "$n" "$gen" "$work/p$n.json" "$gguf" "$@" && last
      theirs "$c" "$n" "$gen" "$work/p$n.json" "$gguf" && last
    done
  done
  rm -rf "$gguf" "$work/off"
}

echo "bench_llamacpp: $(date -u +%FT%TZ), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, REPS=$reps${pre:+, llama.cpp --no-repack}"
case $cases in *a*)
  echo "a: tinyllama-1.1b shapes, ${MIX:-F16}, fits in memory"
  run_case "a tinyllama-1.1b ${MIX:-F16}" tinyllama-1.1b "${PROMPT_LEN:-32}" "${GEN:-32}" ;;
esac
case $cases in *b*)
  echo "b: llama-2-13b shapes, F16, 26 GB (larger than memory); ours --gpu-mem ${GPU_MEM:-4G} --cpu-mem ${CPU_MEM:-12G}"
  run_case "b llama-2-13b (26 GB)" llama-2-13b "${PROMPT_LEN_B:-8}" "${GEN_B:-4}" \
    --gpu-mem "${GPU_MEM:-4G}" --cpu-mem "${CPU_MEM:-12G}" ;;
esac
case $cases in *c*)
  echo "c: llama-2-70b shapes, ${MIX:-F16}, ${LAYERS:-80} layers (larger than memory); ours --gpu-mem ${GPU_MEM:-4G} --cpu-mem ${CPU_MEM:-12G}"
  run_case "c llama-2-70b ${MIX:-F16} ${LAYERS:-80} layers" llama-2-70b "${PROMPT_LEN_B:-8}" "${GEN_B:-4}" \
    --gpu-mem "${GPU_MEM:-4G}" --cpu-mem "${CPU_MEM:-12G}" ;;
esac

"$py" - "$res" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = []
for r in rows:
    if (r["case"], r["prompts"]) not in keys:
        keys.append((r["case"], r["prompts"]))
print()
print("| model | prompts | ours tok/s (median) | llama.cpp tok/s (median) | ours / llama.cpp | same tokens | ours decode GB/s |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for c, n in keys:
    o = [r for r in rows if (r["case"], r["prompts"], r["engine"]) == (c, n, "ours")]
    t = [r for r in rows if (r["case"], r["prompts"], r["engine"]) == (c, n, "llama.cpp")]
    mo = statistics.median(r["tokens_per_s"] for r in o) if o else float("nan")
    mt = statistics.median(r["tokens_per_s"] for r in t) if t else float("nan")
    same = tot = 0   # greedy tokens equal position by position (random weights: near-ties differ)
    if o and t:
        for a, b in zip(o[-1]["tokens"], t[-1]["tokens"]):
            same += sum(x == y for x, y in zip(a, b))
            tot += len(a)
    # weight bytes a decode step reads (the file's) over its median time: steps = new tokens - 1 per prompt
    gbs = [r["model_bytes"] * (r["generated"] / r["prompts"] - 1) / r["decode_s"] / 1e9 for r in o
           if r.get("model_bytes") and r["decode_s"] > 0]
    print("| %s | %d | %.3f (%s) | %.3f (%s) | %.2f | %s | %s |" % (
        c.split(" ", 1)[1], n, mo, ", ".join("%.3f" % r["tokens_per_s"] for r in o), mt,
        ", ".join("%.3f" % r["tokens_per_s"] for r in t), mo / mt if mt else float("nan"),
        "%d/%d" % (same, tot) if tot else "-", "%.2f" % statistics.median(gbs) if gbs else "-"))
pol = [r.get("policy") for r in rows if r["engine"] == "ours"]
mode = sorted({r.get("mode", "") for r in rows if r["engine"] == "llama.cpp"})
print("\nours' policies: %s\nllama.cpp: %s" % (sorted(set(p for p in pol if p)), mode))
EOF
