#!/usr/bin/env bash
# The cost model per weight format (issue 33): a GGUF model's GEMMs are
# charged at the rate the profile measured for the format each matrix is
# held in. Two GGUF models of one Llama shape (H 256, ffn 512, 2 layers,
# vocabulary 512), every matrix F16 in one and Q4_K in the other, scored
# on a hand-written profile (f16: 1 row 0.001 TFLOPS, 4 0.002, 64 0.010,
# 256 0.005; q4k: 1 row 0.001 x 2 / 0.5625, F16's bytes per second at
# Q4_K's 0.5625 bytes a weight, then 4 0.008, 64 0.004, 256 0.002):
#  1. decode at one row reflects the bytes: all on the GPU, gbs 1, 3
#     decode tokens, the F16 model's predicted decode less the Q4_K
#     model's is 3 x (2 layers x 1310720 + head 2 x 256 x 512) FLOPs x
#     (1 / 0.001 - 1 / 0.003556) / 10^12 s (attention alike cancels), and
#     the JSON's gemm_rates say Q4_K went at 0.003556;
#  2. the search picks the GPU batch at the peak of the model's own
#     format's table (64 prompts of 1 token: every GEMM's seconds are
#     FLOPs / rate(gbs) summed over the same rows whatever the batch, so
#     the best gbs is the one of the highest rate): 64 for F16, 4 for Q4_K;
#  3. a profile without Q4_K's table (one written before the formats were
#     measured, given with --hardware) still loads: F16's rates stand in
#     (the Q4_K model predicts what the F16 one does, chooses gbs 64), with
#     a warning naming Q4_K;
#  4. this machine's profile (no --hardware): the Q4_K model's policy
#     measures the gpu tier at its shape with Q4_K's GEMMs (shapes[].mm_fmt
#     .Q4_K, the gpu worker's rows); again: nothing; with that table removed
#     (a cached profile from before): only Q4_K's GEMMs, added to the entry,
#     the rest of it unchanged; with Q4_K in mm_fmt_none (the backend could
#     not run it): nothing measured, the warning;
#  5. the gpu worker's --profile --formats-only: the asked formats' tables
#     and nothing else; a name that is not a ggml quantized format: exit 2.
# Usage: policy_formats.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
bin=$(dirname "$flexgen")
rm -rf "$work" && mkdir -p "$work"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# the two models (zero weights: the policy reads shapes and formats, never
# values) and the profiles
"$py" - "$ref" "$work" <<'PY' || exit 1
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import gguf_write as gw, make_llama_checkpoint as mlc
work = sys.argv[2]
cfg = dict(vocab_size=512, hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
           intermediate_size=512, max_position_embeddings=64, model_type="llama", rms_norm_eps=1e-5,
           rope_theta=10000.0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
gw.GT["Q4_K"] = 12
bytes_per = {"F16": (1, 2), "Q4_K": (256, 144)}   # values, bytes per block
for fmt in ("F16", "Q4_K"):
    t = []
    for hf, shape in mlc.expected_shapes(cfg).items():
        if len(shape) == 1:
            t.append((gw.gguf_name(hf), "F32", np.ones(shape, np.float32)))
        else:
            vals, nb = bytes_per[fmt]
            t.append((gw.gguf_name(hf), fmt, (bytes(shape[0] * shape[1] // vals * nb), list(reversed(shape)))))
    gw.write_gguf(f"{work}/{fmt}.gguf", gw.model_kvs(cfg, "llama", "F16") + gw.vocab_kvs("llama", 512, 1, 2), t)
pts = lambda *p: [{"rows": r, "TFLOPS": x} for r, x in p]
prof = {"gpu": {"backend": "host", "shares_host_cpu": False, "h2d_GBps": 100, "d2h_GBps": 100,
                "mm": pts((1, 0.001), (4, 0.002), (64, 0.010), (256, 0.005)),
                "mm_fmt": {"Q4_K": pts((1, 0.001 * 2 / 0.5625), (4, 0.008), (64, 0.004), (256, 0.002))},
                "attn_prefill_TFLOPS": 0.05, "attn_decode_GBps": 20},
        "cpu": {"attn_decode_GBps": 10}}
json.dump(prof, open(f"{work}/fmt.json", "w"))
del prof["gpu"]["mm_fmt"]
json.dump(prof, open(f"{work}/old.json", "w"))
PY

policy() {   # MODEL PROFILE OUT flags...
  local m=$1 p=$2 out=$3
  shift 3
  "$flexgen" policy --model "$work/$m.gguf" --hardware "$work/$p.json" --offload-dir "$work/off" --json "$@" \
    >"$work/$out.json" 2>"$work/$out.err" || { fail "policy $m on $p: $(grep error "$work/$out.err")"; return 1; }
}
one=(--prompt-len 1 --gen-len 4 --num-prompts 1 --percent 100 0 100 0 100 0 --gpu-batch-size 1 --num-gpu-batches 1)
many=(--prompt-len 1 --gen-len 4 --num-prompts 64)

# ---- 1. decode at one row --------------------------------------------------------
if policy F16 fmt f16-one "${one[@]}" && policy Q4_K fmt q4k-one "${one[@]}"; then
  "$py" - "$work" <<'PY' && echo "ok   one row: decode reflects Q4_K's bytes" || fail "one row: decode not at Q4_K's rate"
import json, sys
w = sys.argv[1]
f, q = (json.load(open(f"{w}/{n}-one.json")) for n in ("f16", "q4k"))
H, F, V, L, tokens = 256, 512, 512, 2, 3
layer = 2 * (4 * H * H + 3 * H * F)                 # q, k, v, o and gate, up, down: 1310720 a row
per_token = L * layer + 2 * H * V                   # and the LM head
want = tokens * per_token * (1 / 0.001 - 1 / (0.001 * 2 / 0.5625)) / 1e12
got = f["predicted_decode_s"] - q["predicted_decode_s"]
r = q["gemm_rates"]["Q4_K"]
ok = abs(got - want) <= 1e-9 * want and abs(r["decode_TFLOPS"] - 0.001 * 2 / 0.5625) < 1e-12 and r["measured"]
ok = ok and r["lm_head"] and list(q["gemm_rates"]) == ["Q4_K"] and list(f["gemm_rates"]) == ["F16"]
print("     F16 %.6g s, Q4_K %.6g s: difference %.6g s, by hand %.6g s" % (
    f["predicted_decode_s"], q["predicted_decode_s"], got, want))
sys.exit(0 if ok else 1)
PY
fi

# ---- 2. the search: the peak of the model's own format -----------------------------
gbs() { "$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["policy"]["gpu_batch_size"])' "$work/$1.json"; }
if policy F16 fmt f16-many "${many[@]}" && policy Q4_K fmt q4k-many "${many[@]}"; then
  got="$(gbs f16-many) $(gbs q4k-many)"
  [ "$got" = "64 4" ] && echo "ok   search: gbs 64 for F16, 4 for Q4_K (their tables' peaks)" ||
    fail "search: gbs (F16, Q4_K) = ($got), expected (64, 4)"
fi

# ---- 3. a profile without Q4_K's rates ---------------------------------------------
if policy Q4_K old q4k-old-one "${one[@]}" && policy Q4_K old q4k-old-many "${many[@]}"; then
  "$py" - "$work" <<'PY' && echo "ok   old profile: loads, F16's rates stand in, said" || fail "old profile"
import json, sys
w = sys.argv[1]
f, q = (json.load(open(f"{w}/{n}.json")) for n in ("f16-one", "q4k-old-one"))
ok = abs(f["predicted_decode_s"] - q["predicted_decode_s"]) <= 1e-12 * f["predicted_decode_s"]
ok = ok and not q["gemm_rates"]["Q4_K"]["measured"] and json.load(open(f"{w}/q4k-old-many.json"))["policy"]["gpu_batch_size"] == 64
ok = ok and "old.json has no GEMM rates with weights in Q4_K" in open(f"{w}/q4k-old-one.err").read()
sys.exit(0 if ok else 1)
PY
fi

# ---- 4. this machine's profile measures the formats a run holds ------------------------
saved_xdg=${XDG_CACHE_HOME-}
export XDG_CACHE_HOME=$work/cache
measured() { grep -oE "profile \[[0-9]+/[0-9]+\]: [^(]*" "$work/$1.err" | sed 's/ *$//' | tr '\n' ';'; }
mine() {   # OUT: the Q4_K model's policy on this machine's profile
  "$flexgen" policy --model "$work/Q4_K.gguf" --offload-dir "$work/off" --device host --json "${one[@]}" \
    >"$work/$1.json" 2>"$work/$1.err" || { fail "$1: $(grep error "$work/$1.err")"; return 1; }
}
if mine p1; then
  prof=$(ls "$XDG_CACHE_HOME"/flexgen/profile-*.json)
  grep -q "profile \[1/3\]: the gpu tier (host backend) at .*'s layer shape, GEMMs with weights in Q4_K (" \
    "$work/p1.err" || fail "first policy: measured '$(measured p1)', expected the gpu tier with Q4_K's GEMMs"
  "$py" - "$prof" "$work/p1.json" <<'PY' || fail "first policy: the profile's Q4_K table"
import json, sys
s = json.load(open(sys.argv[1]))["shapes"]
assert len(s) == 1 and (s[0]["hidden"], s[0]["ffn"]) == (256, 512), s
rows = [p["rows"] for p in s[0]["mm_fmt"]["Q4_K"]]
assert rows == [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024] and all(p["TFLOPS"] > 0 for p in s[0]["mm_fmt"]["Q4_K"]), rows
assert json.load(open(sys.argv[2]))["gemm_rates"]["Q4_K"]["measured"]
PY
  mine p2 && [ -z "$(measured p2)" ] || fail "second policy: measured '$(measured p2)'"
  cp "$prof" "$work/before.json"
  "$py" -c 'import json, sys; p = json.load(open(sys.argv[1])); del p["shapes"][0]["mm_fmt"]
json.dump(p, open(sys.argv[1], "w"))' "$prof"
  if mine p3; then
    case "$(measured p3)" in "profile [1/1]: the gpu tier's GEMMs with weights in Q4_K at "*) ;;
      *) fail "a profile from before: measured '$(measured p3)', expected Q4_K's GEMMs alone" ;; esac
    "$py" - "$work/before.json" "$prof" <<'PY' || fail "a profile from before: the entry is not the one it was, Q4_K added"
import json, sys
a, b = (json.load(open(f))["shapes"] for f in sys.argv[1:])
assert len(b) == 1 and set(a[0]) == set(b[0]), (set(a[0]), set(b[0]))
assert all(a[0][k] == b[0][k] for k in a[0] if k != "mm_fmt") and list(b[0]["mm_fmt"]) == ["Q4_K"]
PY
    echo "ok   this machine's profile: $(measured p1) then nothing, then $(measured p3)"
  fi
  "$py" -c 'import json, sys; p = json.load(open(sys.argv[1])); e = p["shapes"][0]; del e["mm_fmt"]
e["mm_fmt_none"] = ["Q4_K"]; json.dump(p, open(sys.argv[1], "w"))' "$prof"
  if mine p4; then
    [ -z "$(measured p4)" ] && grep -q "has no GEMM rates with weights in Q4_K" "$work/p4.err" &&
      echo "ok   a format the backend could not run: not measured again, said" ||
      fail "mm_fmt_none: measured '$(measured p4)' $(grep -c 'no GEMM rates' "$work/p4.err") warnings"
  fi
fi
if [ -n "$saved_xdg" ]; then export XDG_CACHE_HOME=$saved_xdg; else unset XDG_CACHE_HOME; fi

# ---- 5. the gpu worker's --formats-only ---------------------------------------------
if "$bin/flexgen-gpu-worker" --profile --device host --model opt-125m --quick --json --formats Q8_0,Q4_0 \
    --formats-only >"$work/w.json" 2>"$work/w.err"; then
  "$py" -c 'import json, sys; w = json.load(open(sys.argv[1]))
assert sorted(w["mm_fmt"]) == ["Q4_0", "Q8_0"] and not {"mm", "mm_q4", "attn_decode_GBps", "h2d_GBps"} & set(w), w.keys()
assert all(len(t) == 10 for t in w["mm_fmt"].values())' "$work/w.json" &&
    echo "ok   --formats-only: Q8_0's and Q4_0's tables alone" || fail "--formats-only: $(head -c 300 "$work/w.json")"
else
  fail "--formats-only: $(tail -1 "$work/w.err")"
fi
"$bin/flexgen-gpu-worker" --profile --device host --model opt-125m --formats Q4_K,F32 >/dev/null 2>"$work/w2.err"
rc=$?
[ $rc -eq 2 ] && grep -q "'F32' is not a ggml quantized format" "$work/w2.err" && echo "ok   --formats F32: exit 2" ||
  fail "--formats F32: exit $rc, $(tail -1 "$work/w2.err")"

echo "policy_formats: $fails failed"
[ "$fails" -eq 0 ]
