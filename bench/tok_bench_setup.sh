# tok_bench_setup.sh - sourced by bench_tokenizer.sh and bench_tokenizer_hf.sh
# (after they set root, the repository): what both set up before they time.
#   tok_bench_setup NAME [BUILD_DIR]
# sets bench (flexgen-tok-bench in BUILD_DIR, default build/; exit 2 where it
# is not built), runs (env RUNS, default 5), py (env FG_PYTHON), work (a
# scratch folder removed at exit) and pin, the prefix that keeps a command on
# core 0 (taskset, where there is one): one core for both sides, which node's
# helper threads (GC, compiler) share too.
tok_bench_setup() {
  local build=${2:-$root/build}
  runs=${RUNS:-5}
  py=${FG_PYTHON:-/usr/bin/python3}
  bench="$build/bin/flexgen-tok-bench"
  if [ ! -x "$bench" ]; then
    echo "$1: error: $bench not built (scripts/build.sh, or give the build dir)" >&2
    exit 2
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  pin=()
  if command -v taskset >/dev/null; then pin=(taskset -c 0); fi
}
