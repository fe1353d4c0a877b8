#!/usr/bin/env bash
# Fuzz every target (or those named) for SECONDS each, two at a time, at
# the lowest CPU priority: fuzz/fuzz_all.sh SECONDS [BUILD_DIR] [TARGET...]
# Each target's corpus grows in BUILD_DIR/fuzz/long/NAME/corpus (kept between
# runs), its log is BUILD_DIR/fuzz/long/NAME.log and a crash, leak, hang or
# out-of-memory input lands in BUILD_DIR/fuzz/long/NAME/ (crash-*, leak-*,
# timeout-*, oom-*). Prints one line per target: its exit status, executions,
# cov and ft from libFuzzer's last status line.
set -uo pipefail
secs=${1:?usage: fuzz_all.sh SECONDS [BUILD_DIR] [TARGET...]}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build}
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
if (( ${#targets[@]} == 0 )); then
  targets=(msg safetensors npy config tokenizer tokenizer_json chat_template prompts prompt_ids store profile gguf llama2c tokenizer_l2c)
fi
long=$build/fuzz/long

one() {
  local t=$1 seeds=$root/fuzz/seeds/$1
  [[ $t == msg ]] && seeds=$build/tests/runtime/fuzz_corpus
  mkdir -p "$long/$t/corpus"
  [[ -d $seeds ]] || { echo "$t: no seeds in $seeds (msg: run ctest -R proto.fuzz_corpus first)"; return; }
  nice -n 19 "$build/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 \
    -error_exitcode=1 -timeout_exitcode=1 \
    -print_final_stats=1 -artifact_prefix="$long/$t/" "$long/$t/corpus" "$seeds" >"$long/$t.log" 2>&1
  local rc=$?
  local last execs
  last=$(grep -E '^#[0-9]+' "$long/$t.log" | tail -1)
  execs=$(grep -E '^stat::number_of_executed_units' "$long/$t.log" | awk '{print $2}')
  printf '%-15s rc=%d execs=%s %s\n' "$t" "$rc" "${execs:-?}" \
    "$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' <<<"$last")"
}

mkdir -p "$long"
i=0
for t in "${targets[@]}"; do
  one "$t" &
  if (( ++i % 2 == 0 )); then wait; fi
done
wait
