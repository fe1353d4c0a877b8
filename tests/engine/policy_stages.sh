#!/usr/bin/env bash
# flexgen policy --stages P, the cost model of a pipeline of P machines
# (coordinator/fg_pipecost.c), on FlexGen's T4 preset (no profiling, no MPI):
#  1. --stages 1 prints exactly what no --stages prints (text and JSON, the
#     search and a given --percent);
#  2. OPT-13B (26 GB of weights) with 4G GPU + 16G CPU a machine does not fit
#     one machine without the disk but fits two: P = 2 predicts more than 2x
#     P = 1 (FlexGen's super-linear case: less offloading per stage), P = 4
#     more than P = 2; with every machine holding all it needs on the GPU
#     (OPT-1.3B, a fixed all-GPU policy) P = 2 gains less than 2x;
#  3. the JSON's stages: layers partition [0, L), the embedding on the first
#     and the head on the last, times per stage, the ring, the bottleneck; a
#     slow network binds (bottleneck network or ring) and lowers the figure;
#  4. bad --stages (0, non-integer, more than the model's layers, a block
#     over 64 GPU batches) exit 2 with the reason;
#  5. the network from a profile's network section, the flags over it, the
#     preset's; a bad network.GBps exits 2.
# Usage: policy_stages.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
t4=(--hardware flexgen-t4 --offload-dir "$work/off")
# the search's own seconds differ from run to run
norm() { sed -E 's/"search_s":[0-9.e+-]+//; s/(search: [0-9]+ cases, [0-9]+ LPs), [0-9.]+ s/\1/'; }

# ---- 1. --stages 1 is the default, byte for byte ---------------------------------
cases=(
  "--dummy opt-13b --prompt-len 64 --gen-len 8 --gpu-mem 4G --cpu-mem 16G --disk-mem 200G"
  "--dummy opt-6.7b --prompt-len 512 --gen-len 32 --gpu-mem 15G --cpu-mem 200G --percent 20 80 0 100 0 100 --gpu-batch-size 48 --num-gpu-batches 3 --cpu-cache-compute"
  "--dummy opt-1.3b --prompt-len 32 --gen-len 8 --gpu-mem 1G --cpu-mem 2G --num-prompts 40 --compress-weight"
)
for c in "${cases[@]}"; do
  for j in "" --json; do
    # shellcheck disable=SC2086
    a=$("$flexgen" policy $c "${t4[@]}" $j 2>&1 | norm) || fail "policy $c $j: $a"
    # shellcheck disable=SC2086
    b=$("$flexgen" policy $c "${t4[@]}" --stages 1 $j 2>&1 | norm) || fail "policy $c --stages 1 $j: $b"
    if [ "$a" = "$b" ]; then echo "ok   --stages 1 $j equals no --stages: $c"
    else fail "--stages 1 $j differs: $c"; diff <(echo "$a") <(echo "$b") | head -5; fi
  done
done

# ---- 2, 3. the pipeline's prediction -----------------------------------------------
big=(--dummy opt-13b --prompt-len 64 --gen-len 8 --gpu-mem 4G --cpu-mem 16G --disk-mem 200G "${t4[@]}" --json)
for P in 1 2 4; do
  "$flexgen" policy "${big[@]}" --stages $P >"$work/big$P.json" 2>"$work/big$P.err" || fail "opt-13b --stages $P: $(cat "$work/big$P.err")"
done
"$flexgen" policy "${big[@]}" --stages 2 --net-gbps 0.001 --net-latency-us 2000 >"$work/slow.json" 2>"$work/slow.err" \
  || fail "--net-gbps 0.001: $(cat "$work/slow.err")"
small=(--dummy opt-1.3b --prompt-len 64 --gen-len 8 --percent 100 0 100 0 100 0 --gpu-batch-size 8 --num-gpu-batches 2
       "${t4[@]}" --json)
for P in 1 2; do
  "$flexgen" policy "${small[@]}" --stages $P >"$work/small$P.json" 2>"$work/small$P.err" || fail "opt-1.3b --stages $P: $(cat "$work/small$P.err")"
done
"$py" - "$work" <<'PY' || fail "the pipeline's predictions (above)"
import json, sys
w = sys.argv[1]
load = lambda n: json.load(open(f"{w}/{n}.json"))
tput = lambda j: j["predicted_throughput_tokens_per_s"]
b1, b2, b4, slow, s1, s2 = load("big1"), load("big2"), load("big4"), load("slow"), load("small1"), load("small2")
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)
check("stages" not in b1 and "pipeline" not in b1, "one machine: no pipeline keys")
check(tput(b2) > 2 * tput(b1), f"opt-13b, 4G GPU + 16G CPU a machine: P=2 {tput(b2):.3f} > 2 x P=1 {tput(b1):.3f} (super-linear)")
check(tput(b4) > tput(b2), f"P=4 {tput(b4):.3f} > P=2 {tput(b2):.3f}")
disk = lambda j: 100 - j["policy"]["percent"][0] - j["policy"]["percent"][1]   # weights on disk, %
check(disk(b1) >= 50 and disk(b2) <= 5, f"the gain is less offloading: weights on disk {disk(b1):g}% at P=1, "
      f"{disk(b2):g}% at P=2 (what the percentages' rounding leaves)")
check(tput(s2) < 2 * tput(s1), f"opt-1.3b all on the GPU, the same policy: P=2 {tput(s2):.3f} < 2 x P=1 {tput(s1):.3f}")
for name, j, P in (("P=2", b2, 2), ("P=4", b4, 4)):
    pl, st = j["pipeline"], j["pipeline"]["stage"]
    check(j["stages"] == P and len(st) == P and pl["groups"] == P, f"{name}: {P} stages")
    layers = [(s["first_layer"], s["layers"]) for s in st]
    check(layers[0][0] == 0 and all(a[0] + a[1] == b[0] for a, b in zip(layers, layers[1:])) and
          sum(n for _, n in layers) == 40, f"{name}: stages partition opt-13b's 40 layers: {layers}")
    check([s["embedding"] for s in st] == [True] + [False] * (P - 1) and
          [s["lm_head"] for s in st] == [False] * (P - 1) + [True], f"{name}: embedding first, head last")
    check(all(s["decode_sweep_s"] > 0 and s["prefill_sweep_s"] > 0 for s in st), f"{name}: each stage's times")
    b = pl["decode_token_bounds_s"]
    check(pl["ring_decode_s"] > 0 and b["stage"] > 0 and b["ring"] >= sum(s["decode_sweep_s"] for s in st) and
          pl["bottleneck"], f"{name}: ring {pl['ring_decode_s']:.4g} s, bounds {b}, bottleneck {pl['bottleneck']}")
    check(pl["sequences_per_block"] == P * j["policy"]["gpu_batch_size"] * j["policy"]["num_gpu_batches"],
          f"{name}: a block is P groups of K x B")
    mem = j["memory_bytes"]
    check(all(mem[k] == max(s["memory_bytes"][k] for s in st) for k in mem), f"{name}: memory is the largest stage's")
check(slow["pipeline"]["bottleneck"] in ("network", "ring round trip") and tput(slow) < tput(b2),
      f"a 1 Mbit/s network: bound by {slow['pipeline']['bottleneck']}, {tput(slow):.3f} < {tput(b2):.3f}")
sys.exit(0 if ok else 1)
PY

# ---- 4. bad --stages -----------------------------------------------------------------
bad=(
  "0|expected an integer"
  "abc|expected an integer"
  "1.5|expected an integer"
  "41|opt-13b has 40 decoder layers"
  "65|expected an integer in \[1, 64\]"
  "4 --num-gpu-batches 20|a block of a pipeline holds"
)
for b in "${bad[@]}"; do
  arg=${b%%|*} want=${b#*|}
  # shellcheck disable=SC2086
  "$flexgen" policy --dummy opt-13b --prompt-len 64 "${t4[@]}" --stages $arg >/dev/null 2>"$work/bad.err"
  rc=$?
  if [ $rc = 2 ] && grep -q -- "--stages\|--num-gpu-batches" "$work/bad.err" && grep -q "$want" "$work/bad.err"; then
    echo "ok   --stages $arg: exit 2, $(grep error: "$work/bad.err")"
  else
    fail "--stages $arg: exit $rc, $(cat "$work/bad.err")"
  fi
done

# ---- 5. the network: a profile's network section, the flags over it, a bad value --------
cat >"$work/prof.json" <<'JSON'
{"gpu": {"backend": "cuda", "h2d_GBps": 12, "d2h_GBps": 12, "attn_prefill_TFLOPS": 5, "attn_decode_GBps": 80,
         "mm_prefill_TFLOPS": 20, "mm_decode_TFLOPS": 4},
 "cpu": {"attn_decode_GBps": 12}, "disk": {"disk_read_GBps": 0.5, "disk_write_GBps": 1},
 "network": {"GBps": 1.25, "latency_us": 20}}
JSON
net() { "$flexgen" policy --dummy opt-13b --prompt-len 64 --gen-len 8 --gpu-mem 4G --cpu-mem 16G --offload-dir "$work/off" \
          --stages 2 --json "$@" | "$py" -c 'import json, sys; p = json.load(sys.stdin)["pipeline"]
print("%g %g" % (p["network_GBps"], p["network_latency_us"]))'; }
for c in "--hardware $work/prof.json|1.25 20" "--hardware $work/prof.json --net-gbps 80 --net-latency-us 0|10 0" \
         "--hardware flexgen-t4|4 100"; do
  # shellcheck disable=SC2086
  got=$(net ${c%%|*} 2>&1)
  [ "$got" = "${c#*|}" ] && echo "ok   network $c" || fail "network ${c%%|*}: $got, want ${c#*|}"
done
sed 's/"GBps": 1.25/"GBps": -1/' "$work/prof.json" >"$work/bad_prof.json"
"$flexgen" policy --dummy opt-13b --prompt-len 64 --hardware "$work/bad_prof.json" --stages 2 --offload-dir "$work/off" \
  >/dev/null 2>"$work/bad.err"
rc=$?
[ $rc = 2 ] && grep -q "network.GBps must be a positive number" "$work/bad.err" && echo "ok   a bad network.GBps: exit 2" \
  || fail "a bad network.GBps: exit $rc, $(cat "$work/bad.err")"

[ $fails = 0 ] && echo "all passed" || echo "$fails failed"
exit $((fails > 0))
