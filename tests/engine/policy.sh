#!/usr/bin/env bash
# The policy search (--policy auto, flexgen policy):
#  1. no policy the search returns is refused by the engine, and none
#     exceeds a budget when run: over a grid of models and budgets, the
#     chosen flags are run with the same budgets and the report's GPU and
#     shared memory are within them;
#  2. the LP and its rounding find the cost model's optimum: for fixed batch
#     sizes, the search's predicted throughput is at least that of every
#     policy of a grid of percentages (weights in steps of 20, cache of 50) scored by the same model;
#  3. flexgen run without --percent searches (the log says so) and its
#     output equals the reference engine's at the batch size it chose;
#  4. bad input: an unknown preset, a profile with a missing key, budgets
#     nothing fits, a prompts file missing or too long, exit status 2 with
#     the reason;
#  5. flexgen profile measures every tier, caches and reuses the file; its
#     engine calibration predicts each run without the figure that run
#     measures (same-shaped runs of two rounds predict the same);
#  6. --prompts FILE sizes the workload as flexgen run would tokenize it;
#  7. attention is costed over the keys a query sees: a sliding window of 16
#     predicts a 1024-token prefill and decode 4x faster at least than the
#     same model without one (all on the GPU: GEMMs alike, attention
#     dominant at this width).
# The hardware is FlexGen's T4 preset (no profiling in CI).
# Usage: policy.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
"$py" "$ref/make_checkpoint.py" --out "$work/m" --layers 3 --hidden 64 --heads 4 --ffn 160 --vocab 500 --max-pos 96 \
  --seed 5 >/dev/null || exit 1
"$py" -c 'import json, random; r = random.Random(7)
print(json.dumps([[2] + [r.randrange(4, 500) for _ in range(3 + i % 9)] for i in range(12)]))' >"$work/p.json"

# ---- 1. chosen policies run within their budgets --------------------------------
grid=(
  "m|--gpu-mem 1M --cpu-mem 64M"
  "m|--gpu-mem 600K --cpu-mem 2M --disk-mem 1G"
  "m|--gpu-mem 2M --cpu-mem 1M --disk-mem 1G"
  "m|--gpu-mem 64M --cpu-mem 64M"
  "opt-125m|--gpu-mem 300M --cpu-mem 600M --disk-mem 2G"
  "opt-125m|--gpu-mem 200M --cpu-mem 2G"
)
for g in "${grid[@]}"; do
  model=${g%%|*} budgets=${g#*|}
  if [ "$model" = m ]; then src=(--model "$work/m"); else src=(--dummy "$model"); fi
  tag=$(echo "$model $budgets" | tr -c 'a-zA-Z0-9' _)
  # shellcheck disable=SC2086
  if ! "$flexgen" policy "${src[@]}" --prompt-ids "$work/p.json" --gen-len 4 --hardware flexgen-t4 $budgets \
      --offload-dir "$work/off" --json >"$work/$tag.json" 2>"$work/$tag.err"; then
    fail "policy $model $budgets: $(grep error: "$work/$tag.err")"; continue
  fi
  flags=$("$py" -c 'import json, sys; p = json.load(open(sys.argv[1]))["policy"]
print(" ".join(["--percent"] + ["%g" % x for x in p["percent"]] + ["--gpu-batch-size", str(p["gpu_batch_size"]),
      "--num-gpu-batches", str(p["num_gpu_batches"])] + (["--cpu-cache-compute"] if p["cpu_cache_compute"] else [])))' \
      "$work/$tag.json")
  # shellcheck disable=SC2086
  if ! "$flexgen" run "${src[@]}" --prompt-ids "$work/p.json" --gen-len 4 --ignore-eos $flags $budgets \
      --offload-dir "$work/off" --out "$work/$tag.jsonl" --report "$work/$tag.report" 2>"$work/$tag.run"; then
    fail "run of the chosen policy ($model $budgets: $flags): $(grep error: "$work/$tag.run")"; continue
  fi
  # shellcheck disable=SC2086
  if ! "$py" - "$work/$tag.report" $budgets <<'PY'; then
import json, sys
r = json.load(open(sys.argv[1]))
units = {"K": 2**10, "M": 2**20, "G": 2**30}
b = dict(zip(sys.argv[2::2], sys.argv[3::2]))
size = lambda s: int(float(s[:-1]) * units[s[-1]])
ok = True
if "--gpu-mem" in b and r["peak_gpu_bytes"] > size(b["--gpu-mem"]): ok = False; print("gpu", r["peak_gpu_bytes"])
if "--cpu-mem" in b and r["shm_bytes"] > size(b["--cpu-mem"]): ok = False; print("shm", r["shm_bytes"])
sys.exit(0 if ok else 1)
PY
    fail "$model $budgets: the run went over a budget"; continue
  fi
  echo "ok   $model $budgets: $flags"
done

# ---- 2. the search's optimum against a brute-force grid of the same model --------
for case in "1 1" "4 3"; do
  set -- $case
  gbs=$1 k=$2
  best=$("$flexgen" policy --model "$work/m" --prompt-ids "$work/p.json" --gen-len 4 --hardware flexgen-t4 \
    --gpu-mem 700K --cpu-mem 3M --offload-dir "$work/off" --gpu-batch-size "$gbs" --num-gpu-batches "$k" --json \
    2>/dev/null | "$py" -c 'import json, sys; print(json.load(sys.stdin)["predicted_throughput_tokens_per_s"])') \
    || { fail "search gbs $gbs x $k"; continue; }
  worse=$("$py" - "$flexgen" "$work" "$gbs" "$k" "$best" <<'PY'
import json, subprocess, sys
flexgen, work, gbs, k, best = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
top, arg = 0.0, None
for wg in range(0, 101, 20):
    for wc in range(0, 101 - wg, 20):
        for cg in range(0, 101, 50):
            for cc in range(0, 101 - cg, 50):
                for h in ("100 0", "0 100", "0 0"):
                    for ca in ([], ["--cpu-cache-compute"]):
                        pct = f"{wg} {wc} {cg} {cc} {h}".split()
                        r = subprocess.run([flexgen, "policy", "--model", f"{work}/m", "--prompt-ids", f"{work}/p.json",
                                            "--gen-len", "4", "--hardware", "flexgen-t4", "--gpu-mem", "700K",
                                            "--cpu-mem", "3M", "--offload-dir", f"{work}/off", "--gpu-batch-size", gbs,
                                            "--num-gpu-batches", k, "--json", "--percent", *pct, *ca],
                                           capture_output=True, text=True)
                        if r.returncode == 0 and not json.loads(r.stdout)["over_budget"]:
                            t = json.loads(r.stdout)["predicted_throughput_tokens_per_s"]
                            if t > top: top, arg = t, " ".join(pct + ca)
# the search rounds fractions down to whole percents and works on averaged
# layers; a 2% margin covers that, and nothing of the grid may beat it by more
print(f"{top} {arg}" if top > best * 1.02 else "")
PY
)
  if [ -n "$worse" ]; then fail "gbs $gbs x $k: the grid's '$worse' beats the search's $best"
  else echo "ok   gbs $gbs x $k: search $best tokens/s >= every grid policy (within 2%)"; fi
done

# ---- 3. flexgen run searches without --percent --------------------------------
"$flexgen" run --model "$work/m" --prompt-ids "$work/p.json" --gen-len 4 --ignore-eos --hardware flexgen-t4 \
  --gpu-mem 1M --offload-dir "$work/off" --out "$work/auto.jsonl" --dump-logits "$work/auto.npy" \
  --report "$work/auto.report" 2>"$work/auto.err" || fail "auto run: $(grep error: "$work/auto.err")"
if grep -q "policy auto" "$work/auto.err"; then
  gbs=$("$py" -c 'import json, re, sys; print(re.search(r"gbs (\d+)", json.load(open(sys.argv[1]))["policy"]).group(1))' "$work/auto.report")
  "$flexgen" run --engine reference --model "$work/m" --prompt-ids "$work/p.json" --gen-len 4 --ignore-eos \
    --gpu-batch-size "$gbs" --out "$work/ref.jsonl" --dump-logits "$work/ref.npy" 2>/dev/null || fail "reference run"
  if cmp -s "$work/ref.npy" "$work/auto.npy"; then echo "ok   auto run: gbs $gbs, logits bitwise equal to the reference"
  else fail "auto run: logits differ from the reference at gbs $gbs"; fi
  "$py" -c 'import json, sys; p = json.load(open(sys.argv[1]))["predicted"]; assert p["throughput_tokens_per_s"] > 0' \
    "$work/auto.report" || fail "auto run: no prediction in the report"
  # the report's batch is the GPU batch the search chose, not the prompt count
  "$py" -c 'import json, sys; b = json.load(open(sys.argv[1]))["batch"]; assert b == int(sys.argv[2]), b' \
    "$work/auto.report" "$gbs" || fail "auto run: the report's batch is not the chosen gbs $gbs"
else
  fail "auto run: the log does not say the policy was searched"
fi

# ---- 5. flexgen profile: every tier measured, cached, read back -------------------
saved_xdg=${XDG_CACHE_HOME-}
export XDG_CACHE_HOME=$work/cache
# (the checkpoint's shapes are nearest opt-125m's: the profile of that size is
# the one a run of it reads; a test file larger than its 0.25 GB store, so
# the calibration runs it from disk too; 2 rounds, their runs kept; the offload
# directory does not exist yet: profile creates it with its parents, as run does)
if ! prof=$("$flexgen" profile --quick --rounds 2 --keep-runs "$work/calib" --disk-test-size 512M --model opt-125m \
    --offload-dir "$work/prof-off/a/b" 2>"$work/prof.err"); then
  fail "flexgen profile: $(grep error: "$work/prof.err")"
else
  again=$("$flexgen" profile --quick --disk-test-size 512M --model opt-125m --offload-dir "$work/prof-off/a/b" 2>"$work/prof2.err")
  if [ "$again" != "$prof" ] || ! grep -q "cached" "$work/prof2.err"; then fail "profile: not reused from $prof"; fi
  if "$py" - "$prof" "$work/prof.err" <<'PY'; then echo "ok   profile: $prof"; else fail "profile: keys"; fi
import json, math, sys
p = json.load(open(sys.argv[1]))
need = {"gpu": ["h2d_GBps", "d2h_GBps", "attn_decode_GBps", "attn_prefill_TFLOPS"], "cpu": ["attn_decode_GBps"],
        "disk": ["disk_read_GBps", "disk_write_GBps", "engine_read_GBps", "engine_write_GBps"], "runtime": ["cmd_s"]}
ok = all(math.isfinite(p[s][k]) and p[s][k] > 0 for s in need for k in need[s]) and len(p["gpu"]["mm"]) >= 4
ok = ok and p["gpu"]["model"] == "opt-125m" and len(p["gpu"]["mm_q4"]) >= 4   # the host backend runs 4-bit weights
# the engine run on the size (whole: opt-125m fits) against the tiers' figures
e = p["engine"]
ok = ok and e["model"] == "opt-125m" and e["rounds"] == 2   # --rounds 2: two runs of each kind
ok = ok and all(0.5 <= e[k] <= 4 for k in ("decode_compute_factor", "prefill_compute_factor", "copy_factor",
                                            "prefill_copy_factor"))
# the weights-on-disk run: its factor, or the log says that run was not disk-bound
ok = ok and (0.25 <= e["disk_factor"] <= 4 if "disk_factor" in e else "not disk-bound" in open(sys.argv[2]).read())
# and with more compute beside the reads, how far the two slow each other: a
# share, or the log says it was not measured
ok = ok and (0 <= e["disk_contention"] <= 1 if "disk_contention" in e else "(not measured)" in open(sys.argv[2]).read())
ok = ok and all(0 <= e[k] < 1 for k in ("cpu_attn_unit_s", "cache_load_unit_s"))
if not ok: print(json.dumps(p.get("engine")))
sys.exit(0 if ok else 1)
PY
  # the compute runs of both rounds predict their compute from the tiers'
  # figures alone: the same seconds (had round 2 used round 1's compute
  # factors, its prediction would be theirs times it, and it would measure
  # the ratio left beyond them, near 1, pulling the median there); their
  # copies (the logits) take the copy figure measured in between, and on a
  # host whose cores the compute shares they count in its seconds: set aside
  if "$py" - "$work/calib" "$prof" <<'PY'; then echo "ok   calibration: each run predicted without its own figure"; else fail "calibration: round 2 predicted with round 1's figure"; fi
import json, sys
shared = json.load(open(sys.argv[2]))["gpu"].get("shares_host_cpu")
def compute(i, ph):
    r = json.load(open(f"{sys.argv[1]}/gpu-{i}.report.json"))["predicted"][ph + "_resource_s"]
    return r["compute"] - (r["cpu->gpu"] + r["gpu->cpu"] if shared else 0)
c = [[compute(i, ph) for ph in ("prefill", "decode")] for i in (0, 1)]
ok = all(abs(c[0][k] - c[1][k]) <= 1e-9 * c[0][k] for k in (0, 1))
if not ok: print(c)
sys.exit(0 if ok else 1)
PY
  # the engine's figures enter the cost model where they belong: prefill
  # compute scaled by prefill_compute_factor; every copy's seconds by the
  # copy factors, and on a host that shares its cores (this one), the compute
  # stream's by what the copies added; every disk transfer's by disk_factor;
  # with disk_contention 1 the disk and the compute take turns: each step
  # takes their sum (the copies, inside the compute or faster than the
  # disk, do not bound it), so a phase takes the sum of their seconds
  "$py" - "$prof" "$work" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for name, e in (("f1", {}), ("pre2", {"prefill_compute_factor": 2}),
                ("copy2", {"copy_factor": 2, "prefill_copy_factor": 2}), ("disk2", {"disk_factor": 2}),
                ("turns", {"disk_contention": 1})):
    json.dump(dict(p, engine=e), open(f"{sys.argv[2]}/eng-{name}.json", "w"))
PY
  for vp in f1:gpu f1:wcpu f1:wdisk pre2:gpu copy2:wcpu disk2:wdisk turns:wdisk; do
    v=${vp%:*} pol=${vp#*:}
    case $pol in gpu) pct="100 0 100 0 100 0" ;; wcpu) pct="0 100 100 0 100 0" ;; *) pct="0 0 100 0 100 0" ;; esac
    # shellcheck disable=SC2086
    "$flexgen" policy --dummy opt-125m --prompt-len 16 --gen-len 4 --hardware "$work/eng-$v.json" --percent $pct \
      --gpu-batch-size 4 --num-gpu-batches 2 --json >"$work/score-$v-$pol.json" 2>"$work/score.err" \
      || fail "policy --percent $pct on eng-$v: $(cat "$work/score.err")"
  done
  if "$py" - "$work" "$prof" <<'PY'; then echo "ok   engine figures: each factor 2 doubles its resource's seconds"; else fail "engine figures in the cost model"; fi
import glob, json, os, sys
s = {tuple(os.path.basename(f)[6:-5].split("-")): json.load(open(f)) for f in glob.glob(f"{sys.argv[1]}/score-*.json")}
near = lambda a, b: abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-12)
f1, pre2 = s["f1", "gpu"], s["pre2", "gpu"]
# prefill: compute (and the fixed per-command part, unscaled) -> between 1.5x and 2x; decode untouched
r = pre2["prefill_resource_s"]["compute"] / f1["prefill_resource_s"]["compute"]
ok = 1.5 < r <= 2 + 1e-9 and near(pre2["predicted_decode_s"], f1["predicted_decode_s"])
f1, c2, d1, d2 = s["f1", "wcpu"], s["copy2", "wcpu"], s["f1", "wdisk"], s["disk2", "wdisk"]
for ph in ("prefill_resource_s", "decode_resource_s"):
    a, b = f1[ph], c2[ph]
    ok = ok and a["cpu->gpu"] > 0 and near(b["cpu->gpu"], 2 * a["cpu->gpu"]) and near(b["gpu->cpu"], 2 * a["gpu->cpu"])
    if json.load(open(sys.argv[2]))["gpu"].get("shares_host_cpu"):
        ok = ok and near(b["compute"] - a["compute"], a["cpu->gpu"] + a["gpu->cpu"])
    ok = ok and d1[ph]["disk"] > 0 and near(d2[ph]["disk"], 2 * d1[ph]["disk"])
t, ph1 = s["turns", "wdisk"], d1["predicted_decode_s"]
for ph in ("prefill", "decode"):
    r = t[ph + "_resource_s"]
    ok = ok and near(r["disk"], d1[ph + "_resource_s"]["disk"]) and near(t["predicted_" + ph + "_s"], r["disk"] + r["compute"])
ok = ok and t["predicted_decode_s"] > ph1   # full overlap took the larger alone
if not ok: print(json.dumps({k[0] + "/" + k[1]: [v["prefill_resource_s"], v["decode_resource_s"]] for k, v in s.items()}))
sys.exit(0 if ok else 1)
PY
  # the cached profile is what --policy auto uses when no --hardware is given (and the GPU cannot hold it all)
  "$flexgen" run --model "$work/m" --prompt-ids "$work/p.json" --gen-len 2 --ignore-eos --gpu-mem 300K --cpu-mem 64M \
    --offload-dir "$work/off" --out "$work/cached.jsonl" 2>"$work/cached.err" || fail "auto run on the cached profile"
  grep -q "policy auto ($prof)" "$work/cached.err" && echo "ok   auto run used the cached profile" \
    || fail "auto run did not use $prof: $(grep policy "$work/cached.err")"
  # a disk's test file a virtual disk's host caches reads faster than a
  # store of tens of GB streams: a run that streamed a store larger than the
  # test file keeps what its decode read in the profile (disk.stream), and a
  # model larger than the test file is charged that rate from then on. The
  # profile's test file made 1 MiB here, so opt-125m's 0.25 GB counts as large.
  "$py" - "$prof" "$work" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["engine"] = {}
p["disk"]["file_bytes"] = 1 << 20
json.dump(p, open(sys.argv[1], "w"))
json.dump(p, open(f"{sys.argv[2]}/st-none.json", "w"))
p["disk"]["stream"] = {"read_GBps": p["disk"]["engine_read_GBps"] / 4, "prefill_read_GBps": p["disk"]["engine_read_GBps"] / 8,
                       "store_bytes": 1 << 30}
json.dump(p, open(f"{sys.argv[2]}/st-slow.json", "w"))
PY
  for v in none slow; do
    "$flexgen" policy --dummy opt-125m --prompt-len 16 --gen-len 4 --hardware "$work/st-$v.json" \
      --percent 0 0 100 0 100 0 --gpu-batch-size 4 --num-gpu-batches 2 --json >"$work/st-$v.out" 2>"$work/st-$v.err" \
      || fail "policy on st-$v.json: $(cat "$work/st-$v.err")"
  done
  if "$py" - "$work" <<'PY' && grep -q "as a run streaming a 1.1 GB tier store" "$work/st-slow.err"; then
import json, sys
n, s = (json.load(open(f"{sys.argv[1]}/st-{v}.out")) for v in ("none", "slow"))
near = lambda a, b: abs(a - b) <= 1e-6 * max(abs(a), abs(b))
ok = all(n[ph]["disk"] > 0 and near(s[ph]["disk"], f * n[ph]["disk"]) for ph, f in (("prefill_resource_s", 8), ("decode_resource_s", 4)))
if not ok: print(n["decode_resource_s"], s["decode_resource_s"])
sys.exit(0 if ok else 1)
PY
    echo "ok   disk.stream: a model larger than the test file read at the streamed rates (decode 1/4: 4x the seconds; prefill 1/8: 8x)"
  else fail "disk.stream not applied: $(cat "$work/st-slow.err")"; fi
  # a run from disk whose decode reads more than FG_PROFILE_STREAM_MIN_BYTES (1 GiB: 5 steps of 0.25 GB) records it
  "$flexgen" run --dummy opt-125m --prompt-ids "$work/p.json" --gen-len 6 --ignore-eos --percent 0 0 100 0 100 0 \
    --gpu-batch-size 4 --num-gpu-batches 3 --offload-dir "$work/prof-off/a/b" --out "$work/st.jsonl" \
    --report "$work/st-report.json" 2>"$work/st-run.err" || fail "run from disk: $(grep error "$work/st-run.err")"
  if "$py" - "$prof" "$work/st-report.json" <<'PY'; then echo "ok   a run's decode reads kept as the disk's streaming rate"; else fail "disk.stream not recorded"; fi
import json, sys
st, r = json.load(open(sys.argv[1]))["disk"].get("stream"), json.load(open(sys.argv[2]))
d = r["disk_reads"]["decode"]
ok = st is not None and d["bytes"] >= 1 << 30 and d["seconds"] > 0
ok = ok and abs(st["read_GBps"] - d["bytes"] / d["seconds"] / 1e9) <= 1e-6 * st["read_GBps"] and st["read_bytes"] == d["bytes"]
ok = ok and st["store_bytes"] > 1 << 20 and r["disk_reads"]["prefill"]["bytes"] > 0
p = r["disk_reads"]["prefill"]   # the prefill's rate beside it where it read at least as much (1 GiB)
ok = ok and (abs(st["prefill_read_GBps"] - p["GBps"]) <= 1e-6 * p["GBps"] if p["bytes"] >= 1 << 30 else "prefill_read_GBps" not in st)
if not ok: print(st, r.get("disk_reads"))
sys.exit(0 if ok else 1)
PY
fi
if [ -n "$saved_xdg" ]; then export XDG_CACHE_HOME=$saved_xdg; else unset XDG_CACHE_HOME; fi

# ---- 6. --prompts FILE: the workload is the prompts' count and the longest
# one's tokens (BOS included), as `flexgen tokenize` (BOS first) counts them
"$py" "$ref/make_checkpoint.py" --out "$work/tm" --layers 2 --hidden 64 --heads 4 --ffn 128 --vocab 500 --max-pos 64 \
  --synth-vocab --seed 3 >/dev/null || exit 1
printf 'the cat sat on a mat\nhello\nsome words that are a bit longer than the others\n\nlast one\n' >"$work/text.txt"
want_n=5 want_s=0
while IFS= read -r line; do
  len=$(printf '%s' "$line" | "$flexgen" tokenize --model "$work/tm" | "$py" -c 'import json, sys; print(len(json.load(sys.stdin)))')
  [ "$len" -gt "$want_s" ] && want_s=$len
done <"$work/text.txt"
got=$("$flexgen" policy --model "$work/tm" --prompts "$work/text.txt" --gen-len 4 --hardware flexgen-t4 --json \
      2>"$work/pp.err" | "$py" -c 'import json, sys; d = json.load(sys.stdin); print(d["prompts"], d["prompt_len"])')
if [ "$got" = "$want_n $want_s" ]; then echo "ok   policy --prompts: $got (prompts, longest)"
else fail "policy --prompts: got '$got', want '$want_n $want_s' $(grep error: "$work/pp.err")"; fi

# ---- 4. bad input ------------------------------------------------------------------
expect2() {  # name, expected text, command...
  local name=$1 want=$2; shift 2
  "$@" >/dev/null 2>"$work/e.err"; local rc=$?
  if [ $rc -ne 2 ] || ! grep -q -- "$want" "$work/e.err"; then fail "$name: exit $rc, $(tail -1 "$work/e.err")"
  else echo "ok   $name: $(grep error: "$work/e.err" | head -1)"; fi
}
expect2 "unknown preset" "nope" "$flexgen" policy --dummy opt-125m --prompt-len 8 --hardware nope
expect2 "profile --rounds 0" "rounds" "$flexgen" profile --rounds 0 --out "$work/never.json"
: >"$work/afile"
expect2 "profile --keep-runs on a file" "keep-runs" "$flexgen" profile --keep-runs "$work/afile" --out "$work/never.json"
echo '{"gpu": {"backend": "host"}, "cpu": {}, "disk": {}}' >"$work/bad.json"
expect2 "profile without a key" "h2d_GBps" "$flexgen" policy --dummy opt-125m --prompt-len 8 --hardware "$work/bad.json"
if [ -f "$work/eng-f1.json" ]; then   # an engine figure out of its range (the contention is a share)
  "$py" -c 'import json, sys; p = json.load(open(sys.argv[1])); p["engine"] = {"disk_contention": 1.5}
json.dump(p, open(sys.argv[2], "w"))' "$work/eng-f1.json" "$work/bad-eng.json"
  expect2 "engine figure out of range" "bad-eng.json: engine.disk_contention must be a number in \[0, 1\]" \
    "$flexgen" policy --dummy opt-125m --prompt-len 8 --hardware "$work/bad-eng.json"
  "$py" -c 'import json, sys; p = json.load(open(sys.argv[1])); p["disk"]["stream"] = {"read_GBps": 0, "store_bytes": 1}
json.dump(p, open(sys.argv[2], "w"))' "$work/eng-f1.json" "$work/bad-stream.json"
  expect2 "disk.stream rate not positive" "bad-stream.json: disk.stream.read_GBps must be a positive number" \
    "$flexgen" policy --dummy opt-125m --prompt-len 8 --hardware "$work/bad-stream.json"
fi
expect2 "budgets nothing fits" "no policy fits" "$flexgen" policy --dummy opt-125m --prompt-len 8 --hardware flexgen-t4 \
  --gpu-mem 1M --cpu-mem 1M --disk-mem 1M --offload-dir "$work/off"
expect2 "no prompt length" "--prompt-len" "$flexgen" policy --dummy opt-125m --hardware flexgen-t4
expect2 "prompts file missing" "$work/none.txt" "$flexgen" policy --model "$work/tm" --prompts "$work/none.txt" \
  --hardware flexgen-t4
printf 'a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n o p q r s t u v w x y z\n' \
  >"$work/long.txt"
expect2 "prompt too long" "long.txt:1: the prompt is" "$flexgen" policy --model "$work/tm" --prompts "$work/long.txt" \
  --gen-len 4 --hardware flexgen-t4

# ---- 7. a sliding window's attention: min(context, window) keys ------------------
for w in 0 16; do
  "$py" "$ref/make_llama_checkpoint.py" --type mistral --out "$work/win$w" --layers 2 --hidden 64 --heads 4 \
    --kv-heads 2 --ffn 160 --vocab 300 --max-pos 2048 --sliding-window $w --seed 5 >/dev/null || exit 1
  "$flexgen" policy --model "$work/win$w" --prompt-len 1024 --gen-len 64 --hardware flexgen-t4 \
    --percent 100 0 100 0 100 0 --gpu-batch-size 8 --num-gpu-batches 1 --json >"$work/win$w.json" 2>/dev/null
done
"$py" -c 'import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
for k in ("predicted_prefill_s", "predicted_decode_s"):
    assert b[k] * 4 < a[k], (k, a[k], b[k])
print("ok   a window of 16: prefill %.3g against %.3g s, decode %.3g against %.3g s" % (
    b["predicted_prefill_s"], a["predicted_prefill_s"], b["predicted_decode_s"], a["predicted_decode_s"]))' \
  "$work/win0.json" "$work/win16.json" || fail "window: attention not costed over the window"

echo "policy: $fails failed"
[ "$fails" -eq 0 ]
