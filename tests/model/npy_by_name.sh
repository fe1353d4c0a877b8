#!/usr/bin/env bash
# A FlexGen numpy directory without config.json (as FlexGen's converter
# writes opt-125m-np/) takes its config from its name: the same files with
# and without config.json must give bitwise identical logits, and a
# directory whose name names no OPT size is refused (exit 2).
# Usage: npy_by_name.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
"$py" "$ref/make_checkpoint.py" --out "$work/with-config" --format npy --layers 12 --hidden 768 --heads 12 \
  --ffn 3072 --vocab 50272 --max-pos 2048 --seed 13 --std 0.02 >/dev/null || exit 1
mkdir "$work/opt-125m-np" "$work/mystery-np"
for f in "$work"/with-config/decoder.*; do
  ln "$f" "$work/opt-125m-np/"
  ln "$f" "$work/mystery-np/"
done
echo '[[2, 100, 200, 300]]' >"$work/p.json"
for d in with-config opt-125m-np; do
  "$flexgen" run --engine reference --model "$work/$d" --prompt-ids "$work/p.json" --gen-len 3 --ignore-eos \
    --out "$work/$d.jsonl" --dump-logits "$work/$d.npy" 2>"$work/$d.err" || { echo "FAIL $d: $(cat "$work/$d.err")"; exit 1; }
done
cmp -s "$work/with-config.npy" "$work/opt-125m-np.npy" || { echo "FAIL: logits differ with and without config.json"; exit 1; }
"$flexgen" run --engine reference --model "$work/mystery-np" --prompt-ids "$work/p.json" --gen-len 1 \
  --out "$work/m.jsonl" 2>"$work/m.err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q "mystery-np: no config.json" "$work/m.err"; then
  echo "FAIL mystery-np: exit $rc: $(cat "$work/m.err")"; exit 1
fi
echo "npy_by_name: opt-125m-np without config.json = with it (bitwise); unnamed dir refused: $(grep error: "$work/m.err")"
rm -rf "$work"
