#!/usr/bin/env bash
# The cost model of a mixture of experts (issue 35): the experts are placed
# apart from the dense part by the LP, touched as n routed rows touch them,
# E (1 - (1 - k/E)^n) of E under uniform routing, and loaded as routed or
# all at once, or computed by the cpu worker. A Mixtral-like checkpoint
# (hidden 256, 8 layers, 8 experts of 512, top 2: a layer's experts are
# 8 x 3 x 256 x 512 fp16 = 6291456 bytes; 60 MB of GPU memory all on it,
# 22 MB with the experts off it, whose stacks then pass through the two
# weight slots) on hand-written profiles where
# the GEMMs are nearly free (100 TFLOPS) and one GB/s crosses to the GPU:
#  1. one prompt, dense part and cache on the GPU, experts on the CPU: a
#     decode token moves k/E of a layer's experts under routed loading,
#     all of them under --expert-load all, so 4 decode tokens over 8
#     layers predict 4 x 8 x 6291456 x (2/8, 1) / 1e9 s within 2% (the
#     dense part's and the head's nearly free GEMMs on top);
#  2. a block of 16 one-token rows: routed loading touches 1 - (3/4)^16 of
#     the experts, so its decode is that share of loading all (within 2%);
#  3. the search: one prompt loads as routed (k/E of the bytes); 64
#     prompts on a profile whose GEMMs cost as much as the loads load all
#     (every expert touched anyway, and prefetched under the layer before
#     instead of after the router), each choice the faster of the two as
#     the model scores them;
#  4. a GPU budget that holds the dense part and not the experts (28 MiB): the LP
#     keeps the dense part on the GPU (100%) and puts experts off it;
#  5. a cpu worker that streams the experts 50x faster than they cross to
#     the GPU (a real GPU's profile: compute not on the host's cores): the
#     search has it compute the experts on the CPU (--cpu-expert-compute);
#  6. flexgen policy --percent-experts scores that placement, printed back.
# Usage: policy_experts.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

"$py" "$ref/make_llama_checkpoint.py" --out "$work/m" --case mixtral --hidden 256 --heads 4 --kv-heads 2 --ffn 512 \
  --moe-ffn 512 --layers 8 --vocab 512 --max-pos 128 --seed 3 >/dev/null || exit 1
"$py" - "$work" <<'PY' || exit 1
import json, sys
w = sys.argv[1]
pts = lambda *p: [{"rows": r, "TFLOPS": x} for r, x in p]
base = {"gpu": {"backend": "cuda", "shares_host_cpu": False, "h2d_GBps": 1, "d2h_GBps": 1,
                "mm": pts((1, 100), (1024, 100)), "attn_prefill_TFLOPS": 100, "attn_decode_GBps": 1000},
        "cpu": {"attn_decode_GBps": 0.1}, "disk": {"disk_read_GBps": 0.5, "disk_write_GBps": 0.5}}
json.dump(base, open(f"{w}/io.json", "w"))
slow = json.loads(json.dumps(base))
slow["gpu"]["mm"] = pts((1, 0.0005), (1024, 0.0005))   # GEMMs as dear as the loads
slow["cpu"]["attn_decode_GBps"] = 0.001                  # and the cpu worker no better
json.dump(slow, open(f"{w}/slow.json", "w"))
cpu = json.loads(json.dumps(base))
cpu["cpu"]["attn_decode_GBps"] = 50
json.dump(cpu, open(f"{w}/cpu.json", "w"))
PY

policy() {   # PROFILE OUT flags...
  local p=$1 out=$2
  shift 2
  "$flexgen" policy --model "$work/m" --hardware "$work/$p.json" --offload-dir "$work/off" --json "$@" \
    >"$work/$out.json" 2>"$work/$out.err" || { fail "policy $out: $(grep error "$work/$out.err")"; return 1; }
}
get() { "$py" -c 'import json, sys
o = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): o = o[k]
print(o)' "$work/$1.json" "$2"; }
given=(--percent 100 0 100 0 100 0 --percent-experts 0 100 --num-gpu-batches 1)

# ---- 1. one prompt: k/E of the experts a decode token -------------------------
if policy io r1 "${given[@]}" --prompt-len 1 --gen-len 5 --num-prompts 1 --gpu-batch-size 1 --expert-load routed &&
   policy io a1 "${given[@]}" --prompt-len 1 --gen-len 5 --num-prompts 1 --gpu-batch-size 1 --expert-load all; then
  "$py" - "$work" <<'PY' && echo "ok   one prompt: routed moves k/E of the experts, all moves them all" || fail "one prompt"
import json, sys
w = sys.argv[1]
r, a = (json.load(open(f"{w}/{n}.json"))["predicted_decode_s"] for n in ("r1", "a1"))
We = 8 * 3 * 256 * 512 * 2
want_r, want_a = 4 * 8 * We * 2 / 8 / 1e9, 4 * 8 * We / 1e9
print("     decode: routed %.6g s (by hand %.6g), all %.6g s (by hand %.6g)" % (r, want_r, a, want_a))
sys.exit(0 if abs(r - want_r) <= 0.02 * want_r and abs(a - want_a) <= 0.02 * want_a else 1)
PY
fi

# ---- 2. a block of 16 rows: 1 - (3/4)^16 of the experts ----------------------
if policy io r16 "${given[@]}" --prompt-len 1 --gen-len 5 --num-prompts 16 --gpu-batch-size 16 --expert-load routed &&
   policy io a16 "${given[@]}" --prompt-len 1 --gen-len 5 --num-prompts 16 --gpu-batch-size 16 --expert-load all; then
  "$py" - "$work" <<'PY' && echo "ok   16 rows: routed loads 1 - (3/4)^16 of loading all" || fail "16 rows"
import json, sys
w = sys.argv[1]
r, a = (json.load(open(f"{w}/{n}.json"))["predicted_decode_s"] for n in ("r16", "a16"))
tau = 1 - 0.75 ** 16
print("     decode: routed %.6g s, all %.6g s: %.4f (by hand %.4f)" % (r, a, r / a, tau))
sys.exit(0 if abs(r / a - tau) <= 0.02 * tau else 1)
PY
fi

# ---- 3. the search: routed for one prompt, all for many on dear GEMMs ---------
many=(--prompt-len 4 --gen-len 8 --num-prompts 64 --gpu-batch-size 64 --num-gpu-batches 1 --gpu-mem 28M)
if policy io s1 --prompt-len 1 --gen-len 5 --num-prompts 1 --gpu-mem 28M &&
   policy slow s64 "${many[@]}" &&
   policy slow s64r "${many[@]}" --expert-load routed && policy slow s64a "${many[@]}" --expert-load all; then
  got="$(get s1 policy.expert_load) $(get s64 policy.expert_load)"
  echo "     64 prompts: routed predicts $(get s64r predicted_throughput_tokens_per_s) tokens/s, all $(get s64a predicted_throughput_tokens_per_s)"
  [ "$got" = "routed all" ] && "$py" -c 'import json, sys
r, a = (json.load(open(sys.argv[1] + n))["predicted_throughput_tokens_per_s"] for n in ("/s64r.json", "/s64a.json"))
sys.exit(0 if a > r else 1)' "$work" && echo "ok   search: routed for one prompt, all for 64 on GEMMs as dear as loads" ||
    fail "search: expert load (1 prompt, 64 prompts) = ($got), expected (routed all)"
fi

# ---- 4. a GPU budget for the dense part only -----------------------------------
if policy io b --prompt-len 4 --gen-len 4 --num-prompts 4 --gpu-mem 28M --cpu-mem 1G; then
  got="$(get b policy.percent) $(get b policy.percent_experts)"
  "$py" -c 'import json, sys
p = json.load(open(sys.argv[1]))["policy"]
sys.exit(0 if p["percent"][0] == 100 and p["percent_experts"][0] < 100 else 1)' "$work/b.json" &&
    echo "ok   budget: dense part on the GPU, experts off it: percent $got" ||
    fail "budget: percent and percent_experts $got, expected the dense part 100% on the GPU and experts off it"
fi

# ---- 5. a cpu worker that streams the experts fast ------------------------------
if policy cpu c --prompt-len 1 --gen-len 5 --num-prompts 1 --gpu-mem 28M; then
  got="$(get c policy.cpu_expert_compute) $(get c policy.percent_experts)"
  "$py" -c 'import json, sys
p = json.load(open(sys.argv[1]))["policy"]
sys.exit(0 if p["cpu_expert_compute"] and p["percent_experts"][1] > 0 else 1)' "$work/c.json" &&
    echo "ok   cpu experts: computed where they are: $got" || fail "cpu experts: $got, expected --cpu-expert-compute"
fi

# ---- 6. a given placement of experts, printed back ------------------------------
if "$flexgen" policy --model "$work/m" --hardware "$work/io.json" --offload-dir "$work/off" --prompt-len 4 --gen-len 4 \
     --percent 100 0 100 0 100 0 --gpu-batch-size 2 --num-gpu-batches 2 --percent-experts 25 50 --expert-load all \
     >"$work/given.txt" 2>&1 && grep -q -- "--percent-experts 25 50 --expert-load all" "$work/given.txt"; then
  echo "ok   given: $(grep '^policy' "$work/given.txt")"
else
  fail "given: $(cat "$work/given.txt")"
fi
echo "policy_experts: $fails failure(s)"
[ "$fails" -eq 0 ]
