#!/usr/bin/env bash
# The machine under `flexgen run` is not what the run needs, each case with
# the message the user sees (needs root to mount: exit 77, a skip, where
# mounting is not permitted):
#  - /dev/shm too small for the run's segments (a 16 MiB tmpfs over
#    /dev/shm in a private mount namespace, OPT-125M's weights on the CPU
#    tier): refused before any worker starts, exit 1, with the MiB needed,
#    per segment, and free;
#  - the offload directory on a file system without O_DIRECT (ramfs): the
#    run says it falls back to buffered I/O and its output equals the
#    reference engine's;
#  - the offload directory full (a 64 KiB tmpfs) while the tier store is
#    converted: exit 1 naming the file and ENOSPC, no output file.
# (Read errors from flexgen run: engine_disk_faults; real EIO from a device
# and ENOSPC under the disk worker's writes: disk.eio, disk.enospc.)
# Usage: env_faults.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work/ramfs" "$work/full" || exit 1
if ! mount -t ramfs fgramfs "$work/ramfs" 2>/dev/null; then echo "SKIP: cannot mount (not root?)"; exit 77; fi
trap 'umount "$work/ramfs" "$work/full" 2>/dev/null' EXIT
mount -t tmpfs -o size=64k fgfull "$work/full" || exit 1
"$py" "$ref/make_checkpoint.py" --out "$work/m" --layers 2 --hidden 64 --heads 4 --ffn 128 --vocab 300 \
  --max-pos 64 --seed 9 >/dev/null || exit 1
echo '[[2, 10, 20, 30], [2, 7]]' >"$work/p.json"
common=(--prompt-ids "$work/p.json" --ignore-eos --gpu-batch-size 2 --gen-len 8)
"$flexgen" run --engine reference --model "$work/m" "${common[@]}" --out "$work/ref.jsonl" 2>/dev/null || exit 1
fails=0
fail() { echo "FAIL $1: $2"; fails=$((fails + 1)); }

# /dev/shm too small
if unshare -m true 2>/dev/null; then
  unshare -m sh -c 'mount -t tmpfs -o size=16M fgshm /dev/shm && exec "$@"' sh \
    "$flexgen" run --dummy opt-125m "${common[@]}" --percent 0 100 0 100 0 100 --offload-dir "$work/off" \
    --out "$work/shm.jsonl" 2>"$work/shm.err"
  rc=$?
  want='shared memory: this run needs [0-9.]+ MiB in /dev/shm \(segments w [0-9.]+ MiB.*\) but only [0-9.]+ MiB of its 16.0 MiB are free'
  if [ $rc -ne 1 ]; then fail shm-small "exit $rc (want 1): $(tail -1 "$work/shm.err")"
  elif ! grep -qE "flexgen: error: $want" "$work/shm.err"; then fail shm-small "message: $(tail -1 "$work/shm.err")"
  elif grep -q "worker ready" "$work/shm.err"; then fail shm-small "workers were started before the refusal"
  elif ls "$work"/shm.jsonl* >/dev/null 2>&1; then fail shm-small "an output file was left"
  else echo "ok   shm-small: $(grep "flexgen: error" "$work/shm.err" | cut -c1-190)"; fi
else
  echo "skip shm-small: unshare -m is not permitted"
fi

# no O_DIRECT: weights and KV cache on a ramfs offload dir
"$flexgen" run --model "$work/m" "${common[@]}" --percent 0 0 0 0 100 0 --offload-dir "$work/ramfs/off" \
  --out "$work/ramfs.jsonl" 2>"$work/ramfs.err"
rc=$?
if [ $rc -ne 0 ]; then fail no-odirect "exit $rc: $(grep -m1 error: "$work/ramfs.err")"
elif ! grep -q "disk-worker.*does not support O_DIRECT; using buffered I/O" "$work/ramfs.err"; then fail no-odirect "no fallback message from the disk worker"
elif ! cmp -s "$work/ref.jsonl" "$work/ramfs.jsonl"; then fail no-odirect "output differs from the reference engine's"
else echo "ok   no-odirect: $(grep -m1 "does not support O_DIRECT" "$work/ramfs.err" | cut -c1-170)"; fi

# a full offload file system while converting the tier store
"$flexgen" run --model "$work/m" "${common[@]}" --percent 0 0 100 0 100 0 --offload-dir "$work/full/off" \
  --out "$work/full.jsonl" 2>"$work/full.err"
rc=$?
if [ $rc -ne 1 ]; then fail enospc "exit $rc (want 1)"
elif ! grep -qE "flexgen: error: tier store: .*/full/off/.*: .*No space left on device" "$work/full.err"; then fail enospc "message: $(tail -1 "$work/full.err")"
elif ls "$work"/full.jsonl* >/dev/null 2>&1; then fail enospc "an output file was left"
else echo "ok   enospc: $(grep "flexgen: error" "$work/full.err" | cut -c1-170)"; fi

echo "env_faults: $((3 - fails)) passed, $fails failed"
umount "$work/ramfs" "$work/full" 2>/dev/null
[ $fails -eq 0 ] && rm -rf "$work"
[ $fails -eq 0 ]
