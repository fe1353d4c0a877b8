#!/usr/bin/env bash
# Placement invariance with 4-bit compression on (--compress-weight,
# --compress-cache, both): the offloading engine's tokens and logits are
# bitwise identical across policies (weights and cache on GPU, CPU and disk,
# CPU attention over a compressed cache, several GPU batches, the row
# schedule, no overlap) and bitwise equal to the reference engine run with
# the same flags: compressed data is expanded by the same fg_opt code
# wherever it is computed on. The reference engine with compression is
# itself checked against the numpy oracle (tests/model, oracle_q4_*), and the
# compressed logits must differ from the uncompressed ones (compression is
# really on). Also: the compressed tier store is its own variant beside the
# fp16 one, and the run moves the compressed bytes (--report).
# Usage: placement_q4.sh FLEXGEN WORKDIR [MAKE_LLAMA_CHECKPOINT ARGS]
# With checkpoint arguments the model is make_llama_checkpoint.py's (a Llama-
# family model: its matrices include up_proj, its cache holds kv heads only).
set -uo pipefail
flexgen=$1 work=$2 llama=${3:-}
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
if [ -n "$llama" ]; then
  # shellcheck disable=SC2086
  "$py" "$ref/make_llama_checkpoint.py" --out "$work/m" $llama >/dev/null || exit 1
else
  # head_dim 32: each cache head slice is one padded group
  "$py" "$ref/make_checkpoint.py" --out "$work/m" --layers 3 --hidden 128 --heads 4 --ffn 256 --vocab 500 \
    --max-pos 96 --seed 22 >/dev/null || exit 1
fi
"$py" -c 'import json, random; r = random.Random(5)
print(json.dumps([[2] + [r.randrange(4, 500) for _ in range(1 + (5 * i) % 9)] for i in range(7)]))' >"$work/p.json"
common=(--model "$work/m" --prompt-ids "$work/p.json" --gen-len 4 --ignore-eos --gpu-batch-size 2
        --offload-dir "$work/offload")
fails=0
"$flexgen" run --engine reference "${common[@]}" --out "$work/plain.jsonl" --dump-logits "$work/plain.npy" \
  2>/dev/null || { echo "uncompressed reference run failed"; exit 1; }
policies=(
  "all-gpu|--percent 100 0 100 0 100 0"
  "all-cpu|--percent 0 100 0 100 0 100"
  "weights-on-disk|--percent 0 0 100 0 100 0 --num-gpu-batches 2"
  "cache-on-disk|--percent 100 0 0 0 100 0 --num-gpu-batches 2"
  "cpu-attention|--percent 50 50 0 100 0 100 --cpu-cache-compute"
  "all-on-disk|--percent 0 0 0 0 0 0 --num-gpu-batches 2"
  "three-tiers-cpu-attention|--percent 30 30 30 30 0 0 --num-gpu-batches 4 --cpu-cache-compute"
  "row-no-overlap|--percent 0 50 50 50 100 0 --num-gpu-batches 2 --schedule row --no-overlap"
  "weights-disk-cache-cpu-attention|--percent 0 0 0 100 100 0 --num-gpu-batches 3 --cpu-cache-compute"
)
for flags in "--compress-weight --compress-cache" "--compress-weight" "--compress-cache"; do
  tag=$(echo "$flags" | tr -d ' -')
  # shellcheck disable=SC2086
  "$flexgen" run --engine reference "${common[@]}" $flags --out "$work/ref-$tag.jsonl" \
    --dump-logits "$work/ref-$tag.npy" 2>/dev/null || { echo "FAIL reference run $flags"; exit 1; }
  if cmp -s "$work/plain.npy" "$work/ref-$tag.npy"; then
    echo "FAIL $flags: logits equal the uncompressed ones"; fails=$((fails + 1))
  fi
  # every policy with both flags; a third of them with one flag each
  n=0
  for p in "${policies[@]}"; do
    n=$((n + 1))
    [ "$flags" != "--compress-weight --compress-cache" ] && [ $((n % 3)) -ne 0 ] && continue
    name=${p%%|*} args=${p#*|}
    # shellcheck disable=SC2086
    if ! "$flexgen" run "${common[@]}" $flags $args --out "$work/$tag-$name.jsonl" \
        --dump-logits "$work/$tag-$name.npy" --report "$work/$tag-$name.report.json" 2>"$work/$tag-$name.err"; then
      echo "FAIL $flags $name: run failed: $(grep error: "$work/$tag-$name.err")"; fails=$((fails + 1)); continue
    fi
    if ! cmp -s "$work/ref-$tag.npy" "$work/$tag-$name.npy" ||
       ! diff -q <(grep -o '"output_ids":\[[0-9,]*\]' "$work/ref-$tag.jsonl") \
                 <(grep -o '"output_ids":\[[0-9,]*\]' "$work/$tag-$name.jsonl") >/dev/null; then
      echo "FAIL $flags $name: differs from the reference engine"; fails=$((fails + 1)); continue
    fi
    echo "ok   $flags $name: tokens and logits bitwise equal to the reference"
  done
done
# the compressed store: its own directory, tensors 4-bit, 36/128 of fp16 for
# a (64k, n) matrix
"$py" - "$work/offload" <<'PY' || fails=$((fails + 1))
import os, struct, sys
root = sys.argv[1]
dirs = sorted(os.listdir(root))
q4 = [x for x in dirs if x.endswith("-q4g64")]
if len(q4) != 1:
    sys.exit("FAIL store: no q4g64 store in %s (%s)" % (root, dirs))
with open(os.path.join(root, q4[0], "layer-000.bin"), "rb") as f:
    h = f.read(4096)
    h += f.read(struct.unpack_from("<I", h, 12)[0] - 4096)   # the whole header (a table of experts is long)
comp, n = struct.unpack_from("<I", h, 32)[0], struct.unpack_from("<I", h, 28)[0]
seen = {}
for i in range(n):   # a stack of experts has an entry per expert (offset 108: expert + 1)
    e = 320 + 160 * i
    name = h[e:e + 96].split(b"\0")[0].decode()
    dtype, ndim, expert = struct.unpack_from("<III", h, e + 100)
    d0, d1, off, nb = struct.unpack_from("<QQQQ", h, e + 112)
    seen[(name, expert)] = (dtype, d0, d1, nb)
bad = []
for (name, expert), (dtype, d0, d1, nb) in seen.items():
    # OPT's six; Llama's seven (gate, up, down); Mixtral's experts w1, w2, w3, each expert its own slice
    mat = name.endswith(("proj.weight", "fc1.weight", "fc2.weight", ".w1.weight", ".w2.weight", ".w3.weight"))
    want = 36 * ((d0 + 63) // 64) * d1 if mat else 2 * d0 * d1
    if (dtype == 2) != mat or nb != want:
        bad.append("%s dtype %d %d bytes (want %d)" % (name, dtype, nb, want))
if comp != 1 or bad:
    sys.exit("FAIL store: compression %d; %s" % (comp, "; ".join(bad)))
print("ok   store: %s holds the layer matrices 4-bit (dtype 2, 36 bytes per 64 values), the rest fp16" % q4[0])
PY
# bytes moved: the same all-on-disk policy uncompressed; each flag must
# shrink what crosses to the device (--report h2d_bytes)
"$flexgen" run "${common[@]}" --percent 0 0 0 0 0 0 --num-gpu-batches 2 --out "$work/plain-disk.jsonl" \
  --report "$work/plain-all-on-disk.report.json" 2>/dev/null || { echo "FAIL uncompressed all-on-disk run"; exit 1; }
"$py" - "$work" <<'PY' || fails=$((fails + 1))
import json, sys
w = sys.argv[1]
h2d = {t: json.load(open("%s/%s-all-on-disk.report.json" % (w, t)))["h2d_bytes"]
       for t in ("plain", "compressweight", "compresscache", "compressweightcompresscache")}
print("     h2d bytes, all on disk: " + ", ".join("%s %d (%.3f)" % (t, v, v / h2d["plain"]) for t, v in h2d.items()))
if not (h2d["compressweight"] < h2d["plain"] and h2d["compresscache"] < h2d["plain"]
        and h2d["compressweightcompresscache"] < min(h2d["compressweight"], h2d["compresscache"])):
    sys.exit("FAIL bytes: compression does not shrink the bytes moved")
print("ok   bytes: each flag shrinks the bytes copied to the device")
PY
[ "$fails" -eq 0 ] && echo "placement_q4: all bitwise equal" || echo "placement_q4: $fails failure(s)"
[ "$fails" -eq 0 ]
