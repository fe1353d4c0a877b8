#!/usr/bin/env bash
# `flexgen run --attach gpu`, as a developer debugging the gpu worker would
# use it: the coordinator spawns the cpu and disk workers and prints the
# exact command for the gpu worker; the test starts it from that line (its
# first incarnation stops itself mid-run, FLEXGEN_FAULT=gpu:stop, and is then
# killed by hand with SIGKILL), waits for the coordinator to ask again,
# starts it again, and the run must finish with the reference engine's
# output, the restart and the redone block in the log.
# Usage: attach.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
"$py" "$ref/make_checkpoint.py" --out "$work/m" --layers 2 --hidden 64 --heads 4 --ffn 128 --vocab 300 \
  --max-pos 64 --seed 9 >/dev/null || exit 1
echo '[[2, 10, 20, 30], [2, 7]]' >"$work/p.json"
common=(--model "$work/m" --prompt-ids "$work/p.json" --ignore-eos --gpu-batch-size 2 --gen-len 8)
"$flexgen" run --engine reference "${common[@]}" --out "$work/ref.jsonl" 2>/dev/null || exit 1
log=$work/run.err
die() { echo "FAIL: $*"; [ -n "${coord:-}" ] && kill "$coord" 2>/dev/null; [ -n "${w:-}" ] && kill -9 "$w" 2>/dev/null; exit 1; }

"$flexgen" run "${common[@]}" --percent 0 0 100 0 100 0 --offload-dir "$work/off" --out "$work/out.jsonl" \
  --attach gpu 2>"$log" &
coord=$!

# the Nth "waiting for the gpu worker" announcement; its next line is the command
command_of() {
  local n=$1
  for _ in $(seq 300); do
    local c
    c=$(grep -A1 "waiting for the gpu worker; start it by hand" "$log" | grep '^  ' | sed -n "${n}p")
    [ -n "$c" ] && { echo "$c"; return 0; }
    kill -0 "$coord" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

cmd=$(command_of 1) || die "no command printed for the gpu worker: $(tail -3 "$log")"
case "$cmd" in *flexgen-gpu-worker\ --connect\ ipc://*) ;; *) die "odd command: $cmd" ;; esac
grep -q "cpu worker ready" "$log" && grep -q "disk worker ready" "$log" || sleep 1
grep -q "cpu worker ready" "$log" && grep -q "disk worker ready" "$log" || die "the other workers were not spawned"
echo "ok   printed: $cmd"

# by hand, 1: it stops at its 20th command; then kill it as a user would
FLEXGEN_FAULT=gpu:stop:20 $cmd 2>"$work/w1.err" &
w=$!
for _ in $(seq 300); do
  [ "$(awk '{print $3}' /proc/$w/stat 2>/dev/null)" = T ] && break
  sleep 0.1
done
[ "$(awk '{print $3}' /proc/$w/stat 2>/dev/null)" = T ] || die "the hand-started worker did not reach its 20th command"
kill -9 "$w"
wait "$w" 2>/dev/null
echo "ok   hand-started gpu worker (pid $w) killed mid-run"

# by hand, 2: the coordinator asks again; the run continues
cmd2=$(command_of 2) || die "the coordinator did not ask for the gpu worker again: $(tail -3 "$log")"
[ "$cmd2" = "$cmd" ] || die "the second command differs: $cmd2"
$cmd2 2>"$work/w2.err" &
w=$!
wait "$coord"
rc=$?
coord=
wait "$w"
wrc=$?
w=
[ $rc -eq 0 ] || die "flexgen exit $rc: $(grep -m1 error: "$log")"
[ $wrc -eq 0 ] || die "the second worker exited $wrc after SHUTDOWN"
cmp -s "$work/ref.jsonl" "$work/out.jsonl" || die "output differs from the reference engine's"
grep -qE "the gpu worker \(pid [0-9]+\) was silent for" "$log" || die "no death in the log"
grep -q "redoing the block" "$log" || die "no redo of the block in the log"
echo "ok   restarted by hand; output equals the reference engine's"
rm -rf "$work"
