#!/usr/bin/env bash
# Mixtures of experts beside llama.cpp (issue 35, must show 6): the same
# GGUF file of random weights (bench/gguf_random.py, llama.cpp's Q4_K_M
# recipe for MoE), the same prompts as token ids, greedy, EOS ignored, in
# one sitting, ours and llama.cpp interleaved, at 1 prompt and at 32+:
#   q  qwen3-30b-a3b's shapes (48 layers, 128 experts, top 8; 18.6 GB):
#      fits in memory.
#   m  mixtral-8x7b's shapes (32 layers, 8 experts, top 2; 28.4 GB in all):
#      larger than memory. LAYERS_M of its 32 layers: by default as many as
#      the offload directory holds twice (the GGUF and our tier store beside
#      it, with 4 GB to spare, at most 55 GB in all); the script says how
#      many it wrote and how that compares with the memory limit below.
# The machine's limits first, in the same sitting: memory read bandwidth
# and the fp32 FMA peak (flexgen-fmt-bench, with each case's expert Linear
# in Q4_K and Q6_K at 1, 8 and 32 rows beside them) and, for m, the disk's
# streaming rate (flexgen-disk-bench: O_DIRECT, 1 MiB x 32, DISK_GB of the
# GGUF itself). The load average and the busiest processes at the start and
# the end: other people's work shares this machine.
# Memory: both engines run inside one memory cgroup (v1) of MEM_LIMIT bytes
# (default: MemAvailable at the start less 1 GiB; 0: none), so that the
# file's page cache, our shared memory and llama.cpp's buffers all count
# against one limit that is printed, and an engine that outgrows it is
# killed there, not some other process on the machine; its peak
# (memory.max_usage_in_bytes, page cache included) is recorded per run.
# Each engine starts with the group's page cache dropped (force_empty), so
# neither reads the file from what the other left.
# Ours: each POLICIES_Q / POLICIES_M entry, "label:flags" (flags with
# commas for spaces; @n is replaced by the prompt count), run under the case's
# budgets; "auto" is --policy auto. llama.cpp: node-llama-cpp 3.21.1's CPU
# build (bench/llamacpp_bench.mjs: 2 threads, mmap, all prompts as parallel
# sequences of one context).
# Tokens/s = generated tokens / (prefill + decode) seconds: ours from its
# report, llama.cpp from the first prompt token submitted to the last new
# token. Per ours run also: a decode step's seconds, the weight bytes it
# moved to the device and read from disk (the report's weight_loads), the
# experts its batches chose (routed loading), and its rate beside the limit
# (in memory: bytes the step's weights take, dense part + chosen experts,
# over its seconds, of the read bandwidth; larger than memory: the disk
# bytes a step read over its seconds, of the disk's rate).
# Usage: [REPS=3] [OFFLOAD_DIR=/var/tmp] [COUNTS_Q="1 32 64"] [COUNTS_M="1 32"]
#        [PROMPT_LEN=32 GEN=32] [PROMPT_LEN_M=8 GEN_M=4] [LAYERS_Q=48] [LAYERS_M=N]
#        [MEM_LIMIT=BYTES] [POLICIES_Q="..."] [POLICIES_M="..."] [DISK_GB=8]
#        [Q_GGUF=FILE] [M_GGUF=FILE]   (files written before by gguf_random.py: used, kept)
#        [GPU_MEM_Q=4G CPU_MEM_Q=16G] [GPU_MEM_M=4G CPU_MEM_M=14G] [XC_M=62.5]
#        bench/bench_moe.sh [q|m|qm]   (build first; not for CI)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
flexgen=$root/build/bin/flexgen
cases=${1:-qm}
reps=${REPS:-3}
gib=$((1 << 30))
lib=$("$root/scripts/fetch-llamacpp.sh") || { echo "bench_moe: llama.cpp cannot be installed here"; exit 1; }
"$root/scripts/fetch-gguf-py.sh" >/dev/null || { echo "bench_moe: gguf-py cannot be fetched"; exit 1; }
work=$(mktemp -d "${OFFLOAD_DIR:-/var/tmp}/flexgen-moe.XXXXXX") || exit 1
# llama.cpp's --no-repack as a shim (bench/llamacpp_norepack.c), against its own source's llama.h
shim=$("$root/bench/llamacpp_norepack.sh" "$lib" "$work") || exit 1
res=$work/results.jsonl
: >"$res"

# ---------------------------------------------------------------- the memory cgroup
avail=$(($(awk '/MemAvailable/ {print $2}' /proc/meminfo) * 1024))
limit=${MEM_LIMIT:-$((avail - gib))}
cg=
if [ "$limit" != 0 ]; then
  cg=/sys/fs/cgroup/memory/flexgen-moe-$$
  if ! mkdir "$cg" || ! echo "$limit" >"$cg/memory.limit_in_bytes"; then echo "bench_moe: no memory cgroup"; exit 1; fi
fi
trap 'rm -rf "$work"; [ -z "$cg" ] || rmdir "$cg" 2>/dev/null' EXIT
in_cg() {   # run a command inside the cgroup, its peak reset first; first in line for the OOM killer
  [ -z "$cg" ] || { echo 1 >"$cg/memory.force_empty" 2>/dev/null; echo 0 >"$cg/memory.max_usage_in_bytes"; }
  ( [ -z "$cg" ] || echo "$BASHPID" >"$cg/cgroup.procs"; echo 1000 >/proc/self/oom_score_adj; exec "$@" )
}
sweep() {   # a killed run's shared memory and run directory (the next run would sweep them too, later)
  local id
  id=$(sed -n 's|.*/run-\([0-9a-f]*\)/ctl.*|\1|p' "$1" | head -1)
  [ -z "$id" ] || rm -rf /dev/shm/flexgen-"$id"-* /tmp/flexgen-"$(id -u)"/run-"$id"
}
peak() { if [ -z "$cg" ]; then echo 0; else cat "$cg/memory.max_usage_in_bytes"; fi; }

load() {   # the load average and the busiest processes (other people's work shares the machine)
  echo "  $(date -u +%TZ) load average: $(cut -d' ' -f1-3 /proc/loadavg); memory available $(($(awk '/MemAvailable/ {print $2}' /proc/meminfo) / 1048576)) GiB"
  top -bn1 -o %CPU -w 200 | sed -n '8,12p' | awk '{c = $12; for (i = 13; i <= NF && i < 15; i++) c = c " " $i; printf "    %5s%% cpu %6s%% mem  %s\n", $9, $10, substr(c, 1, 110)}'
}

prompts() {   # N LEN FILE: N prompts of LEN ids, BOS (1) first
  "$py" -c 'import json, random, sys
n, s = int(sys.argv[1]), int(sys.argv[2]); r = random.Random(6)
print(json.dumps([[1] + [r.randrange(259, 32000) for _ in range(s - 1)] for _ in range(n)]))' "$1" "$2" >"$3"
}

# ---------------------------------------------------------------- one run of each engine
ours() {   # CASE N GEN P.json GGUF LABEL flags...
  local c=$1 n=$2 gen=$3 p=$4 gguf=$5 label=$6
  shift 6
  in_cg "$flexgen" run --model "$gguf" --prompt-ids "$p" --gen-len "$gen" --ignore-eos \
    --offload-dir "$work/off" --out "$work/out.jsonl" --report "$work/r.json" "$@" 2>"$work/ours.log" ||
    { echo "    ours ($label) failed: $(grep -E 'error|Killed' "$work/ours.log" | tail -2)"; sweep "$work/ours.log"; return 1; }
  "$py" - "$work/r.json" "$work/out.jsonl" "$c" "$n" "$label" "$(peak)" "$*" >>"$res" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
toks = [o["output_ids"] for o in sorted((json.loads(l) for l in open(sys.argv[2])), key=lambda o: o["id"])]
pt = r["weight_loads"]["per_token"][1:]   # the decode steps (0: the prefill)
steps = max(1, len(pt))
avg = lambda k: sum(t[k] for t in pt) / steps
print(json.dumps({"case": sys.argv[3], "prompts": int(sys.argv[4]), "engine": "ours", "label": sys.argv[5],
                  "flags": sys.argv[7], "tokens_per_s": r["throughput_tokens_per_s"],
                  "gen_s": r["prefill_s"] + r["decode_s"], "prefill_s": r["prefill_s"], "decode_s": r["decode_s"],
                  "step_s": r["decode_s"] / steps, "load_s": r["load_s"], "generated": r["generated_tokens"],
                  "policy": r["policy"], "moved_step": avg("dense_bytes") + avg("expert_bytes"),
                  "disk_step": avg("expert_disk_bytes"), "routed_step": avg("routed_experts"),
                  "disk_read_bytes": r.get("disk_read_bytes"), "peak_bytes": int(sys.argv[6]), "tokens": toks}))
EOF
  sed -n 's/.*policy auto:/    auto chose:/p' "$work/ours.log" | head -1
}

theirs() {   # CASE N GEN P.json GGUF VARIANT: repack (llama.cpp's default) or norepack (the shim)
  local pre=
  [ "$6" = repack ] || pre=$shim
  [ ! -e "$work/killed-$1-$6" ] || { echo "    llama.cpp ($6): not run again (killed before)"; return 1; }
  if ! LD_PRELOAD=$pre in_cg node "$root/bench/llamacpp_bench.mjs" --lib "$lib" --model "$5" --prompt-ids "$4" \
      --gen-len "$3" --threads 2 >"$work/theirs.json" 2>"$work/theirs.log"; then
    echo "    llama.cpp ($6) failed: $(tail -1 "$work/theirs.log" | cut -c1-160)" \
      "$(dmesg 2>/dev/null | grep -i 'killed process' | tail -1 | cut -c1-160)"
    touch "$work/killed-$1-$6"
    return 1
  fi
  "$py" -c 'import json, sys
r = json.load(open(sys.argv[1]))
r.update(case=sys.argv[2], prompts=int(sys.argv[3]), engine="llama.cpp", label="llama.cpp" + sys.argv[5],
         generated=r["generated_tokens"], peak_bytes=int(sys.argv[4]))
print(json.dumps(r))' "$work/theirs.json" "$1" "$2" "$(peak)" "$([ "$6" = repack ] || echo " --no-repack")" >>"$res"
}

last() { tail -1 "$res" | "$py" -c 'import json, sys; r = json.load(sys.stdin)
x = "" if r["engine"] != "ours" else " step %.3f s, moved %.2f GB, disk %.2f GB, routed %.0f, load %.0f s" % (
    r["step_s"], r["moved_step"] / 1e9, r["disk_step"] / 1e9, r["routed_step"], r["load_s"])
print("    %-12s %7.3f tokens/s (%d tokens in %.2f s; prefill %.2f s; peak %.1f GB)%s" % (r["label"], r["tokens_per_s"],
      r["generated"], r["gen_s"], r["prefill_s"], r["peak_bytes"] / 1e9, x))'; }

run_case() {   # CASE GGUF PROMPT_LEN GEN "COUNTS" "POLICIES" "LLAMA.CPP VARIANTS" budget flags...
  local c=$1 gguf=$2 plen=$3 gen=$4 counts=$5 pols=$6 variants=$7
  shift 7
  local n r pol label flags v
  for n in $counts; do
    prompts "$n" "$plen" "$work/p$n.json"
    for r in $(seq "$reps"); do
      echo "  $c, $n prompts x $plen tokens, $gen new, round $r/$reps"
      for pol in $pols; do
        label=${pol%%:*} flags=${pol#*:}
        flags=${flags//,/ } flags=${flags//@n/$n}
        # shellcheck disable=SC2086
        if [ "$label" = auto ]; then ours "$c" "$n" "$gen" "$work/p$n.json" "$gguf" auto --policy auto "$@" && last
        else ours "$c" "$n" "$gen" "$work/p$n.json" "$gguf" "$label" $flags "$@" && last; fi
      done
      for v in $variants; do theirs "$c" "$n" "$gen" "$work/p$n.json" "$gguf" "$v" && last; done
    done
  done
}

write_gguf() {   # CASE SIZE LAYERS FILE: written (unless FILE is there already), its bytes per part recorded
  local t0
  t0=$(date +%s)
  if [ -f "$4" ]; then echo "  $4: there already (not removed at the end)"
  else
    "$py" "$root/bench/gguf_random.py" --size "$2" --mix q4_k_m --layers "$3" --out "$4" | sed 's/^/  /' || return 1
    echo "  written in $(($(date +%s) - t0)) s ($(df -h --output=avail "$work" | tail -1 | tr -d ' ') free)"
  fi
  GGUF_PY=${GGUF_PY:-$HOME/.cache/flexgen/gguf-py} "$py" - "$1" "$4" >>"$res" <<'EOF'
import json, os, sys
sys.path.insert(0, os.environ["GGUF_PY"])
import gguf
r = gguf.GGUFReader(sys.argv[2])
arch = r.fields["general.architecture"].contents()
n = lambda t: int(t.n_bytes)
print(json.dumps({"file": sys.argv[1], "size": os.path.getsize(sys.argv[2]),
                  "layers": r.fields[arch + ".block_count"].contents(), "E": r.fields[arch + ".expert_count"].contents(),
                  "experts": sum(n(t) for t in r.tensors if "_exps." in t.name),
                  "dense": sum(n(t) for t in r.tensors if "_exps." not in t.name and t.name != "token_embd.weight")}))
EOF
}

echo "bench_moe: $(date -u +%FT%TZ), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB," \
  "REPS=$reps, memory cgroup limit $(awk -v b="$limit" 'BEGIN {printf "%.2f GB", b / 1e9}')," \
  "$(df -h --output=avail "$work" | tail -1 | tr -d ' ') free in $work"
load
echo "== the machine's limits"
"$root/build/bin/flexgen-fmt-bench" --out 768 --in 2048 --rows 1,8,32 --formats Q4_K,Q6_K | tee "$work/fmt.txt" |
  sed 's/^/  /' || exit 1
"$root/build/bin/flexgen-fmt-bench" --out 14336 --in 4096 --rows 1,2,8 --formats Q4_K,Q6_K | sed -n '2,$p' |
  sed 's/^/  /'
bw=$(sed -n 's/.*memory read \([0-9.]*\) GB\/s.*/\1/p' "$work/fmt.txt")
echo "{\"limits\": 1, \"read_GBps\": $bw}" >>"$res"

case $cases in *q*)
  lq=${LAYERS_Q:-48}
  echo "== q: qwen3-30b-a3b shapes, Q4_K_M, $lq layers, in memory"
  fq=${Q_GGUF:-$work/q.gguf}
  write_gguf q qwen3-30b-a3b "$lq" "$fq" || exit 1
  run_case q "$fq" "${PROMPT_LEN:-32}" "${GEN:-32}" "${COUNTS_Q:-1 32 64}" \
    "${POLICIES_Q:-auto xcpu:--percent,100,0,100,0,100,0,--percent-experts,0,100,--gpu-batch-size,@n
      xcpu-cc:--percent,100,0,100,0,100,0,--percent-experts,0,100,--gpu-batch-size,@n,--cpu-expert-compute}" \
    "${LCPP_Q:-repack}" \
    --gpu-mem "${GPU_MEM_Q:-4G}" --cpu-mem "${CPU_MEM_Q:-16G}"
  rm -f "$work/q.gguf"
  load ;;
esac

case $cases in *m*)
  per=886000000 base=185000000   # bytes a mixtral layer and the embedding and head take in Q4_K_M
  free_b=$(df -B1 --output=avail "$work" | tail -1)
  fit=$(( (free_b - 4000000000) / 2 < 55000000000 / 2 ? (free_b - 4000000000) / 2 : 55000000000 / 2 ))
  lm=${LAYERS_M:-$(( (fit - base) / per < 32 ? (fit - base) / per : 32 ))}
  [ "$lm" -ge 1 ] || { echo "bench_moe: no room for case m in $work"; exit 1; }
  echo "== m: mixtral-8x7b shapes, Q4_K_M, $lm of 32 layers, larger than memory"
  fm=${M_GGUF:-$work/m.gguf}
  write_gguf m mixtral-8x7b "$lm" "$fm" || exit 1
  fsize=$(stat -c %s "$fm")
  echo "  the file: $(awk -v b="$fsize" 'BEGIN {printf "%.2f GB", b / 1e9}'), the memory limit" \
    "$(awk -v b="$limit" 'BEGIN {printf "%.2f GB", b / 1e9}')$([ "$fsize" -le "$limit" ] && [ "$limit" != 0 ] &&
      echo ': NOT larger than memory (set MEM_LIMIT lower or LAYERS_M higher)')"
  "$root/build/bin/flexgen-disk-bench" read --file "$fm" --bs 1M --qd 32 --size "${DISK_GB:-8}G" \
    >"$work/disk.txt" 2>&1
  disk=$(sed -n 's/read_GBps=//p' "$work/disk.txt")
  echo "  disk: ${disk:-?} GB/s (O_DIRECT, 1 MiB x 32, ${DISK_GB:-8} GB of the GGUF)"
  echo "{\"limits\": 1, \"disk_GBps\": ${disk:-0}}" >>"$res"
  xc=${XC_M:-62.5}
  run_case m "$fm" "${PROMPT_LEN_M:-8}" "${GEN_M:-4}" "${COUNTS_M:-1 32}" \
    "${POLICIES_M:-auto xr:--percent,100,0,100,0,100,0,--percent-experts,0,$xc,--gpu-batch-size,@n
      xa:--percent,100,0,100,0,100,0,--percent-experts,0,$xc,--gpu-batch-size,@n,--expert-load,all
      xrc:--percent,100,0,100,0,100,0,--percent-experts,0,$xc,--gpu-batch-size,@n,--cpu-expert-compute}" \
    "${LCPP_M:-repack norepack}" \
    --gpu-mem "${GPU_MEM_M:-4G}" --cpu-mem "${CPU_MEM_M:-14G}"
  rm -rf "$work/m.gguf" "$work/off"   # (M_GGUF stays)
  load ;;
esac

# ---------------------------------------------------------------- the table
"$py" - "$res" <<'EOF'
import json, statistics as stt, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
lim = {k: v for r in rows if r.get("limits") for k, v in r.items()}
files = {r["file"]: r for r in rows if r.get("file")}
rows = [r for r in rows if r.get("engine")]
med = lambda xs: stt.median(xs) if xs else float("nan")
print("\n| case | prompts | engine / policy | tok/s median (runs) | / llama.cpp | decode step s | "
      "step's weight bytes | of the limit | peak GB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for c in dict.fromkeys(r["case"] for r in rows):
    f = files.get(c, {})
    for n in dict.fromkeys(r["prompts"] for r in rows if r["case"] == c):
        rs = [r for r in rows if (r["case"], r["prompts"]) == (c, n)]
        # llama.cpp's best variant that ran (its default, or --no-repack where the default could not)
        theirs = max([med([r["tokens_per_s"] for r in rs if r["label"] == v])
                      for v in {r["label"] for r in rs if r["engine"] == "llama.cpp"}] or [float("nan")])
        # the experts a step's batches chose (summed over layers), from a run that loads as routed with
        # every expert off the GPU: routing does not depend on placement, so it holds for every run here
        routed = med([r["routed_step"] for r in rs if r["engine"] == "ours" and r["routed_step"] > 0])
        touched = f["dense"] + routed * f["experts"] / (f["layers"] * f["E"]) if f and routed == routed else 0
        for label in dict.fromkeys(r["label"] for r in rs):
            g = [r for r in rs if r["label"] == label]
            tps = med([r["tokens_per_s"] for r in g])
            runs = ", ".join("%.3g" % r["tokens_per_s"] for r in g)
            ours = g[0]["engine"] == "ours"
            if ours:
                s = med([r["step_s"] for r in g])
            else:   # llama.cpp: the steps after every sequence's first token
                s = med([(r["gen_s"] - r["prefill_s"]) / max(1, r["gen_len"] - 1) for r in g])
            byts = share = "-"
            if c == "m" and ours:
                d = med([r["disk_step"] for r in g])
                byts = "%.2f GB from disk (%.2f moved)" % (d / 1e9, med([r["moved_step"] for r in g]) / 1e9)
                if lim.get("disk_GBps"):
                    share = "%.2f of disk" % (d / s / 1e9 / lim["disk_GBps"])
            elif c != "m" and touched:
                byts = "%.2f GB (%.0f experts)" % (touched / 1e9, routed)
                share = "%.2f of read bw" % (touched / s / 1e9 / lim["read_GBps"])
            print("| %s | %d | %s | %.3f (%s) | %s | %.3f | %s | %s | %.1f |" % (
                c, n, label, tps, runs, "%.2f" % (tps / theirs) if ours and theirs == theirs else "-", s, byts,
                share, med([r["peak_bytes"] for r in g]) / 1e9))
print("\n/ llama.cpp: over the median of llama.cpp's best variant that ran")
print("limits: memory read %s GB/s, disk %s GB/s" % (lim.get("read_GBps", "-"), lim.get("disk_GBps", "-")))
for c, f in files.items():
    print("%s: %d layers, %.2f GB: dense part %.2f GB (the embedding not counted), experts %.2f GB" % (
        c, f["layers"], f["size"] / 1e9, f["dense"] / 1e9, f["experts"] / 1e9))
for r in rows:
    if r["engine"] == "ours" and r["label"] == "auto":
        print("auto (%s, %d prompts): %s" % (r["case"], r["prompts"], r["policy"]))
EOF
