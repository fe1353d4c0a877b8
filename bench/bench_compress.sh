#!/usr/bin/env bash
# 4-bit compression with weights on disk (issue 14, must-show 4): the tier
# store's size and the bytes moved per generated token, fp16 against
# --compress-weight (and both flags), and the throughput of each, run
# interleaved in one sitting (fp16, q4, q4+cache, fp16, ...) with medians.
# Throughput is given for the whole run and for the decode phase alone (the
# prefill computes over every prompt token, so it is the phase compute
# bounds). Where the disk is the bottleneck the speed-up should come close
# to the store's shrink factor (fp16 bytes / 4-bit bytes of the weights read per
# token); where compute is (the host backend on a small machine), it will
# not, and the expansion of every weight before its GEMM costs compute.
#
# Usage: bench/bench_compress.sh [MODEL] [REPS] [GEN_LEN] [GBS]
#   MODEL a --dummy name (default opt-1.3b; opt-13b needs ~26 GB + 7 GB of
#   disk in $OFFLOAD and its weights read once per token: a quiet machine),
#   REPS rounds (default 3), GEN_LEN new tokens (default 8), GBS sequences
#   (default 4). Env: OFFLOAD (default /var/tmp/flexgen-q4bench), DEVICE
#   (the gpu worker's backend), EXTRA (more flexgen run flags), DISK_BPS
#   (root only: every run reads the disk at most this many bytes/s, through
#   a blkio cgroup throttle on the offload directory's disk; see below).
# DISK_BPS: this machine's disk is virtual and its host caches what was read
# lately, so a store of a few GB streams at 2-4 GB/s while a model larger
# than that cache (opt-30b, 60 GB) streams at 1.15 GB/s. With the cache,
# opt-13b's 4-bit store comes in faster than the host backend expands it
# and the run is compute-bound, not disk-bound; DISK_BPS=1150000000 gives
# every variant the disk a large model sees here, the case the shrink
# factor is about. It is an emulation and the output says so.
# A missing store is built by an untimed run of its variant first, and kept
# in $OFFLOAD for the next call.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
flexgen=$root/build/bin/flexgen py=${FG_PYTHON:-/usr/bin/python3}
model=${1:-opt-1.3b} reps=${2:-3} gen=${3:-8} gbs=${4:-4}
off=${OFFLOAD:-/var/tmp/flexgen-q4bench}
work=$(mktemp -d /var/tmp/flexgen-q4b.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$off"
"$py" -c "import json, random; r = random.Random(4)
print(json.dumps([[2] + [r.randrange(4, 50000) for _ in range(31)] for _ in range($gbs)]))" >"$work/p.json"
variants=("fp16|" "q4w|--compress-weight" "q4wc|--compress-weight --compress-cache")
common=(--dummy "$model" --prompt-ids "$work/p.json" --gen-len "$gen" --ignore-eos --gpu-batch-size "$gbs"
        --num-gpu-batches 1 --percent 0 0 100 0 100 0 --offload-dir "$off")
[ -n "${DEVICE:-}" ] && common+=(--device "$DEVICE")
cg=
if [ -n "${DISK_BPS:-}" ]; then
  dev=$(findmnt -n -o SOURCE --target "$off")
  parent=$(lsblk -no PKNAME "$dev" 2>/dev/null | head -1)
  majmin=$(lsblk -dno MAJ:MIN "/dev/${parent:-${dev#/dev/}}" | tr -d ' ')
  if [ -d /sys/fs/cgroup/blkio ]; then
    cg=/sys/fs/cgroup/blkio/flexgen-bench-$$
    mkdir "$cg" && echo "$majmin $DISK_BPS" >"$cg/blkio.throttle.read_bps_device"
  else
    cg=/sys/fs/cgroup/flexgen-bench-$$
    mkdir "$cg" && echo "$majmin rbps=$DISK_BPS" >"$cg/io.max"
  fi
  trap 'rm -rf "$work"; rmdir "$cg" 2>/dev/null' EXIT
  echo "disk reads throttled to $DISK_BPS B/s on $majmin (an emulated uncached disk: a blkio cgroup)"
fi
run() {   # name flags round
  # shellcheck disable=SC2086
  ( [ -z "$cg" ] || echo "$BASHPID" >"$cg/cgroup.procs"; exec "$flexgen" run "${common[@]}" $2 ${EXTRA:-} --out "$work/$1.jsonl" --report "$work/$1-$3.json" ) 2>"$work/$1.err" \
    || { echo "run $1 failed:"; tail -3 "$work/$1.err"; exit 1; }
}
echo "model $model, weights on disk, gbs $gbs, prompt 32, gen $gen; $reps rounds interleaved"
# round 0, untimed, builds a store that is missing (a conversion is not a run)
for v in "${variants[@]}"; do
  case ${v%%|*} in fp16) s=fp16 ;; *) s=q4g64 ;; esac
  [ -e "$off/$model-$s" ] || run "${v%%|*}" "${v#*|}" 0
done
for r in $(seq 1 "$reps"); do
  for v in "${variants[@]}"; do run "${v%%|*}" "${v#*|}" "$r"; done
done
"$py" - "$work" "$off" "$model" "$reps" <<'PY'
import glob, json, os, statistics, sys
work, off, model, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def store(suffix):
    d = os.path.join(off, "%s-%s" % (model, suffix))
    return sum(os.path.getsize(f) for f in glob.glob(d + "/*.bin"))
sizes = {"fp16": store("fp16"), "q4": store("q4g64")}
print("tier store: fp16 %.3f GB, q4g64 %.3f GB: shrink %.2fx (the six matrices alone: 128/36 = 3.56x)"
      % (sizes["fp16"] / 1e9, sizes["q4"] / 1e9, sizes["fp16"] / sizes["q4"]))
rows = {}
for v in ("fp16", "q4w", "q4wc"):
    rs = [json.load(open("%s/%s-%d.json" % (work, v, r))) for r in range(1, reps + 1)]
    tok = rs[0]["generated_tokens"]
    dec = [x["prompts"] * (x["gen_len"] - 1) / x["decode_s"] for x in rs]   # the decode phase alone
    rows[v] = {"tput": statistics.median(x["throughput_tokens_per_s"] for x in rs),
               "all": [x["throughput_tokens_per_s"] for x in rs], "dec": statistics.median(dec), "dec_all": dec,
               "disk": rs[0]["disk_read_bytes"] / tok, "h2d": rs[0]["h2d_bytes"] / tok,
               "d2h": rs[0]["d2h_bytes"] / tok}
print("%-6s %14s %14s %14s %12s %8s %12s %8s   rounds (all; decode)" % ("", "disk rd B/tok", "h2d B/tok",
      "d2h B/tok", "tokens/s", "speedup", "decode tok/s", "speedup"))
for v, x in rows.items():
    print("%-6s %14.4g %14.4g %14.4g %12.4g %8.2f %12.4g %8.2f   %s; %s" % (v, x["disk"], x["h2d"], x["d2h"], x["tput"],
          x["tput"] / rows["fp16"]["tput"], x["dec"], x["dec"] / rows["fp16"]["dec"],
          " ".join("%.3g" % t for t in x["all"]), " ".join("%.3g" % t for t in x["dec_all"])))
print("bytes read from disk per token shrink %.2fx with --compress-weight"
      % (rows["fp16"]["disk"] / rows["q4w"]["disk"]))
PY
