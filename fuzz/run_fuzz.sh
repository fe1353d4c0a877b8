#!/usr/bin/env bash
# One bounded fuzz run for ctest: run_fuzz.sh FUZZER SEEDS WORK SECONDS.
# New inputs go to WORK/corpus (never into SEEDS, which is in the source
# tree), a crash to WORK/crash-*. Exit 77 (skip) where no fuzzer was built.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 secs=$4
if [[ ! -x $fuzzer ]]; then
  echo "skip: $(basename "$fuzzer") not built (needs clang with libFuzzer; see FG_FUZZ in fuzz/CMakeLists.txt)"
  exit 77
fi
[[ -d $seeds ]] || { echo "error: no seeds folder $seeds" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/corpus"
# -timeout: one input longer than 10 s is a hang; -rss_limit_mb: a parser
# that asks for gigabytes on a small file is a bug. Leak detection is on.
# Every finding exits 1: libFuzzer's own default, 77, is ctest's "skipped".
exec "$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 \
  -error_exitcode=1 -timeout_exitcode=1 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$seeds"
