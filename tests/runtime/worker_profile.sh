#!/bin/sh
# The gpu and cpu workers' --profile, on OPT-125M shapes with --quick: with
# --json, one JSON object holding every key of the role, each number finite
# and > 0 (profile_check.py), and no shm segment left behind; without
# --json a short summary; bad flags are bad usage (exit 2, a message,
# nothing on stdout).
#   worker_profile.sh gpu|cpu WORKER PYTHON WORKDIR
set -u
[ $# -eq 4 ] || { echo "usage: worker_profile.sh gpu|cpu WORKER PYTHON WORKDIR" >&2; exit 2; }
ROLE=$1 WK=$2 PY=$3 W=$4
CHECK=$(dirname "$0")/profile_check.py
rm -rf "$W" && mkdir -p "$W" || exit 1
trap 'rm -rf "$W"' EXIT

segs() { ls /dev/shm 2>/dev/null | grep -c -- "-$ROLE-profile\$"; }
before=$(segs)
"$WK" --profile --json --quick --model opt-125m >"$W/out.json" 2>"$W/err.txt"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: --profile --json exited $rc"; cat "$W/err.txt"; exit 1; }
"$PY" "$CHECK" "$ROLE" opt-125m "$W/out.json" || { cat "$W/out.json"; exit 1; }
[ "$(segs)" = "$before" ] || { echo "FAIL: --profile left a shm segment behind:"; ls /dev/shm; exit 1; }

"$WK" --profile --quick --model opt-125m >"$W/out.txt" 2>"$W/err.txt" || { echo "FAIL: summary"; cat "$W/err.txt"; exit 1; }
grep -q "GB/s" "$W/out.txt" && grep -q "opt-125m" "$W/out.txt" ||
    { echo "FAIL: summary lacks the figures:"; cat "$W/out.txt"; exit 1; }
cat "$W/out.txt"

bads="--model=nope|--model nope|--bogus|--model"
[ "$ROLE" = gpu ] && bads="$bads|--gpu-mem 1M --quick --model opt-125m|--gpu-mem lots|--device nope|--formats F32|--formats"
IFS='|'
for bad in $bads; do
    unset IFS
    # shellcheck disable=SC2086
    "$WK" --profile $bad >"$W/out.txt" 2>"$W/err.txt"
    rc=$?
    [ $rc -eq 2 ] && [ -s "$W/err.txt" ] && [ ! -s "$W/out.txt" ] ||
        { echo "FAIL: --profile $bad: exit $rc (want 2 with a message, nothing on stdout)"; cat "$W/err.txt"; exit 1; }
    echo "bad usage ok: --profile $bad: $(head -1 "$W/err.txt")"
    IFS='|'
done
unset IFS
echo "worker_profile $ROLE: ok"
