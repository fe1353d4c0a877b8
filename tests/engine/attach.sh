#!/usr/bin/env bash
# `flexgen run --attach gpu`, as a developer debugging the gpu worker would
# use it: the coordinator spawns the cpu and disk workers and prints the
# exact command for the gpu worker; the test starts it from that line. Its
# first incarnation stops itself mid-run (FLEXGEN_FAULT=gpu:stop, as a
# breakpoint would) and is declared dead after 3 s of silence; then
#  pause: it is continued (SIGCONT): the coordinator takes it back with the
#    commands it holds, which must run once, not again;
#  kill: it is killed by hand (SIGKILL); the coordinator asks again, the
#    test starts it again, and the block is redone.
# Both runs must end with the reference engine's output.
# Usage: attach.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
. "$(dirname "$0")/small_model.sh"
common=(--model "$work/m" --prompt-ids "$work/p.json" --ignore-eos --gpu-batch-size 2 --gen-len 8)
"$flexgen" run --engine reference "${common[@]}" --out "$work/ref.jsonl" 2>/dev/null || exit 1
die() { echo "FAIL $case: $*"; [ -n "${coord:-}" ] && kill "$coord" 2>/dev/null; [ -n "${w:-}" ] && kill -9 "$w" 2>/dev/null; exit 1; }

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
wait_log() {  # ERE, what
  for _ in $(seq 200); do grep -qE "$1" "$log" && return 0; sleep 0.1; done
  die "$2: $(tail -2 "$log")"
}

for case in pause kill; do
  log=$work/$case.err
  # --device host as a flag, not the environment: the printed command carries it, as a user's would, and
  # the output is held to the reference engine's bits, which the host backend equals
  "$flexgen" run "${common[@]}" --percent 0 0 100 0 100 0 --offload-dir "$work/off" --out "$work/$case.jsonl" \
    --device host --attach gpu 2>"$log" &
  coord=$!
  cmd=$(command_of 1) || die "no command printed for the gpu worker: $(tail -3 "$log")"
  case "$cmd" in *flexgen-gpu-worker\ --connect\ ipc://*) ;; *) die "odd command: $cmd" ;; esac
  wait_log "cpu worker ready" "the cpu worker was not spawned"
  wait_log "disk worker ready" "the disk worker was not spawned"
  [ $case = pause ] && echo "ok   printed: $cmd"

  FLEXGEN_FAULT=gpu:stop:20 $cmd 2>"$work/$case-w1.err" &
  w=$!
  wait_log "the gpu worker \(pid $w\) was silent for" "the stopped worker was not declared dead"
  if [ $case = pause ]; then
    kill -CONT "$w"
    wait_log "the gpu worker \(pid $w\) is back" "the continued worker was not taken back"
  else
    kill -9 "$w"
    wait "$w" 2>/dev/null
    cmd2=$(command_of 2) || die "the coordinator did not ask for the gpu worker again: $(tail -3 "$log")"
    [ "$cmd2" = "$cmd" ] || die "the second command differs: $cmd2"
    $cmd2 2>"$work/$case-w2.err" &
    w=$!
  fi
  wait "$coord"
  rc=$?
  coord=
  wait "$w"
  wrc=$?
  w=
  [ $rc -eq 0 ] || die "flexgen exit $rc: $(grep -m1 error: "$log")"
  [ $wrc -eq 0 ] || die "the last gpu worker exited $wrc after SHUTDOWN"
  cmp -s "$work/ref.jsonl" "$work/$case.jsonl" || die "output differs from the reference engine's"
  if [ $case = pause ]; then
    echo "ok   pause: $(grep -m1 -o "the gpu worker (pid [0-9]*) is back.*" "$log"); output equals the reference engine's"
  else
    grep -q "redoing the block" "$log" || die "no redo of the block in the log"
    echo "ok   kill: killed by hand mid-run, started again from the printed command; output equals the reference engine's"
  fi
done
rm -rf "$work"
