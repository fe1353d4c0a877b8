#!/usr/bin/env bash
# Supervision seen from `flexgen run`, each fault with the message the user
# sees. The outputs of every run that must recover are compared with the
# reference engine's (one process, no workers), byte for byte.
#  - a coordinator busy for 12 s between supervisor calls (a tier-store
#    conversion made long by FLEXGEN_TEST_STORE_STALL_S; workers give up on a
#    silent coordinator after 10 s): no worker leaves or is restarted;
#  - a worker that hangs, alive and silent (it SIGSTOPs itself): declared
#    dead after 3 s, replaced, the block redone;
#  - a worker stuck in a command while it heartbeats (its executor never
#    returns): the command deadline (--cmd-timeout 2) declares it dead,
#    naming the command, and it is replaced like a dead one;
#  - a reply that does not decode (garbled), a command cut short: the
#    worker is restarted and what it had in flight re-issued;
#  - a gpu worker that dies in the middle of its setup (arena made, weights
#    not all uploaded): set up again;
#  - a worker that dies on every start: given up after 6 deaths in a row,
#    exit 1 with the reason, no output file (the cap on deaths in a whole
#    run is runtime.max_deaths).
# Faults come from FLEXGEN_FAULT (runtime/fg_fault.h); ONCE files keep a
# restarted worker from repeating them.
# Usage: supervision.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
. "$(dirname "$0")/small_model.sh"
common=(--model "$work/m" --prompt-ids "$work/p.json" --ignore-eos --gpu-batch-size 2)
run=(run "${common[@]}" --gen-len 8 --percent 0 0 100 0 100 0 --offload-dir "$work/off")
"$flexgen" run --engine reference "${common[@]}" --gen-len 8 --out "$work/ref.jsonl" 2>/dev/null || exit 1
fails=0
fail() { echo "FAIL $1: $2"; fails=$((fails + 1)); }
restarts='declared dead|exiting|ready again|killed by|exited with|malformed'

# name, expected log line (ERE), then the environment for the run
recovers() {
  local name=$1 want=$2; shift 2
  rm -f "$work/once" "$work/$name.jsonl"
  env "$@" "$flexgen" "${run[@]}" --out "$work/$name.jsonl" 2>"$work/$name.err"
  local rc=$?
  if [ $rc -ne 0 ]; then fail "$name" "exit $rc: $(grep -m1 error: "$work/$name.err")"
  elif ! cmp -s "$work/ref.jsonl" "$work/$name.jsonl"; then fail "$name" "output differs from the reference engine's"
  elif ! grep -qE "$want" "$work/$name.err"; then fail "$name" "no '$want' in the log"
  else echo "ok   $name: $(grep -m1 -E "$want" "$work/$name.err" | cut -c1-160)"; fi
}

# A: a long coordinator step from an empty offload dir; nobody restarts
t0=$(date +%s)
FLEXGEN_TEST_STORE_STALL_S=12 "$flexgen" "${run[@]}" --out "$work/a.jsonl" 2>"$work/a.err"
rc=$? t1=$(date +%s)
if [ $rc -ne 0 ]; then fail stall "exit $rc: $(grep -m1 error: "$work/a.err")"
elif [ $((t1 - t0)) -lt 12 ]; then fail stall "the run took $((t1 - t0)) s: the stall did not happen"
elif grep -qE "$restarts" "$work/a.err"; then fail stall "workers left or were restarted: $(grep -m1 -E "$restarts" "$work/a.err")"
elif ! cmp -s "$work/ref.jsonl" "$work/a.jsonl"; then fail stall "output differs from the reference engine's"
else echo "ok   stall: the coordinator away $((t1 - t0)) s, no worker restarted"; fi

# B..D: recovered faults
recovers hang "the gpu worker \(pid [0-9]+\) was silent for [0-9.]+ s: declared dead" \
  FLEXGEN_FAULT=gpu:stop:20:$work/once
grep -q "redoing the block" "$work/hang.err" || fail hang "no redo of the block in the log"
stuck_run=("${run[@]}")
run+=(--cmd-timeout 2)
recovers stuck "the gpu worker \(pid [0-9]+\) is stuck in [A-Z_]+ ([A-Z_]+ )?seq [0-9]+ .*: unanswered for [0-9.]+ s" \
  FLEXGEN_FAULT=gpu:hang:20:$work/once
grep -q "redoing the block" "$work/stuck.err" || fail stuck "no redo of the block in the log"
grep -q "was silent" "$work/stuck.err" && fail stuck "declared dead for silence, not by the command deadline"
run=("${stuck_run[@]}")
recovers garbled-reply "the gpu worker \(pid [0-9]+\) sent a malformed message" FLEXGEN_FAULT=gpu:garble:20:$work/once
recovers truncated-command "worker \(pid [0-9]+\) reports that a message from the coordinator did not decode" \
  FLEXGEN_FAULT=coord:truncate:30:$work/once

# G: the gpu worker dies after DEVICE_INIT, before the upload of its
# GPU-resident weights ends (its 10th command: segment maps, DEVICE_INIT,
# then copies): the uploads re-issued to its successor, which has no arena,
# fail, and the setup starts over
disk_run=("${run[@]}")
run=(run "${common[@]}" --gen-len 8 --percent 50 50 100 0 100 0 --offload-dir "$work/off")
recovers setup-crash "gpu worker restarted during its setup: setting it up again" FLEXGEN_FAULT=gpu:crash:10:$work/once
run=("${disk_run[@]}")

# E, F: given up, exit 1, nothing passed off as output
gives_up() {
  local name=$1 want=$2 gen=$3 fault=$4
  FLEXGEN_FAULT=$fault "$flexgen" "${run[@]}" --gen-len "$gen" --out "$work/$name.jsonl" 2>"$work/$name.err"
  local rc=$?
  if [ $rc -ne 1 ]; then fail "$name" "exit $rc (want 1)"
  elif ! grep -qE "flexgen: error: .*$want" "$work/$name.err"; then fail "$name" "no '$want' in: $(grep error: "$work/$name.err" | tail -1)"
  elif ls "$work/$name".jsonl* >/dev/null 2>&1; then fail "$name" "an output file was left"
  else echo "ok   $name: $(grep "flexgen: error:" "$work/$name.err" | cut -c1-170)"; fi
}
gives_up crash-loop "the disk worker is gone: it died 6 times in a row without answering a command \(last: .*signal 6" \
  8 disk:crash:1

echo "supervision: $((8 - fails)) passed, $fails failed"
[ $fails -eq 0 ] && rm -rf "$work"
[ $fails -eq 0 ]
