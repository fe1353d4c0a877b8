#!/usr/bin/env bash
# Disk faults seen from `flexgen run` with weights on disk: a read error in
# the disk worker fails the run (exit 1) with the store file and offset named
# and no output written; a store file truncated under the offload directory
# is detected at the next start and rebuilt, and the run then matches the
# reference engine bitwise; a flipped byte in a tensor's data is caught by
# its checksum on first read (no corrupted weight is used).
# Usage: disk_faults.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
. "$(dirname "$0")/small_model.sh"
run=(run --model "$work/m" --prompt-ids "$work/p.json" --gen-len 3 --ignore-eos --gpu-batch-size 2
     --percent 0 0 100 0 100 0 --offload-dir "$work/off")
fails=0
"$flexgen" run --engine reference --model "$work/m" --prompt-ids "$work/p.json" --gen-len 3 --ignore-eos \
  --gpu-batch-size 2 --out "$work/ref.jsonl" --dump-logits "$work/ref.npy" 2>/dev/null || exit 1
"$flexgen" "${run[@]}" --out "$work/a.jsonl" 2>/dev/null || { echo "FAIL: first run"; exit 1; }

# a read error in the disk worker
FG_AIO_FAULT=read:EIO "$flexgen" "${run[@]}" --out "$work/e.jsonl" 2>"$work/e.err"
rc=$?
if [ $rc -ne 1 ] || ! grep -qE "disk worker: .*/(globals|layer-[0-9]+)\.bin: read error at offset [0-9]+" "$work/e.err" \
   || [ -e "$work/e.jsonl" ] || [ -e "$work/e.jsonl.partial" ]; then
  echo "FAIL read-error: exit $rc: $(grep error: "$work/e.err")"; fails=$((fails + 1))
else
  echo "ok   read-error: $(grep error: "$work/e.err" | cut -c1-150)"
fi

# a truncated store file: detected, rebuilt, the result unchanged
f=$(ls "$work"/off/*/layer-001.bin)
truncate -s 8192 "$f"
"$flexgen" "${run[@]}" --out "$work/t.jsonl" --dump-logits "$work/t.npy" 2>"$work/t.err" \
  || { echo "FAIL truncated: run failed: $(grep error: "$work/t.err")"; fails=$((fails + 1)); }
if ! grep -q "rebuilt" "$work/t.err"; then echo "FAIL truncated: no rebuild reported"; fails=$((fails + 1))
elif ! cmp -s "$work/ref.npy" "$work/t.npy"; then echo "FAIL truncated: logits differ from the reference"; fails=$((fails + 1))
else echo "ok   truncated store file rebuilt: $(grep -o 'converting.*rebuilt)' "$work/t.err" | head -1)"; fi

# a flipped byte in a tensor's data: the header still reads fine, the
# checksum of the tensor's first read fails the run naming the file; the
# file is removed, and the next run rebuilds it and matches the reference
f=$(ls "$work"/off/*/layer-000.bin)
"$py" - "$f" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[-4096 + 10] ^= 0x40     # inside the last tensor (each starts a 4096-byte block)
open(path, "wb").write(data)
PY
"$flexgen" "${run[@]}" --out "$work/c.jsonl" 2>"$work/c.err"
rc=$?
if [ $rc -ne 1 ] || ! grep -q "layer-000.bin: tensor .* does not match its checksum" "$work/c.err" || [ -e "$work/c.jsonl" ]; then
  echo "FAIL flipped-byte: exit $rc: $(grep error: "$work/c.err")"; fails=$((fails + 1))
else
  echo "ok   flipped-byte: $(grep error: "$work/c.err" | cut -c1-150)"
fi
"$flexgen" "${run[@]}" --out "$work/d.jsonl" --dump-logits "$work/d.npy" 2>"$work/d.err" \
  || { echo "FAIL flipped-byte rerun: $(grep error: "$work/d.err")"; fails=$((fails + 1)); }
cmp -s "$work/ref.npy" "$work/d.npy" || { echo "FAIL flipped-byte rerun: logits differ"; fails=$((fails + 1)); }

echo "disk_faults: $((3 - fails)) passed, $fails failed"
[ $fails -eq 0 ] && rm -rf "$work"
[ $fails -eq 0 ]
