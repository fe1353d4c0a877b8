#!/usr/bin/env bash
# A first run with --policy auto (the default) measures only what its choice
# depends on, into one profile per machine that serves every model size:
#  1. everything fits the GPU budget: no profile at all, none written;
#  2. the CPU holds what the GPU cannot: the tiers are measured, not the
#     disk (the profile has no disk section); the offload directory is
#     created with its parents;
#  3. the CPU cannot hold it all: only the disk is measured now, with a test
#     file sized to the model's store (at least FG_PROFILE_DISK_MIN_BYTES);
#  4. a model of another shape: nothing measured, the nearest shape's
#     figures used (the log says which);
#  5. a Llama-family model (GQA, a gated MLP) after these OPT shapes: the gpu
#     tier measured again, at its own layer shape (the profile's new entry
#     keyed by its q and kv widths, ffn size and kind), nothing else;
# each output equal to the reference engine's (--device host: its bits).
# Usage: first_run.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
. "$(dirname "$0")/small_model.sh"
export XDG_CACHE_HOME=$work/cache
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
common=(--prompt-ids "$work/p.json" --gen-len 8 --device host)
"$flexgen" run --engine reference --model "$work/m" "${common[@]}" --out "$work/ref.jsonl" 2>/dev/null || exit 1
"$py" "$ref/make_checkpoint.py" --out "$work/m2" --layers 2 --hidden 128 --heads 4 --ffn 256 --vocab 300 \
  --max-pos 64 --seed 4 >/dev/null || exit 1
"$flexgen" run --engine reference --model "$work/m2" "${common[@]}" --out "$work/ref2.jsonl" 2>/dev/null || exit 1

run() {   # CASE MODEL flags...: the run, its output checked against the reference
  local case=$1 m=$2
  shift 2
  "$flexgen" run --model "$work/$m" "${common[@]}" --out "$work/$case.jsonl" "$@" 2>"$work/$case.log"
  local rc=$?
  if [ $rc -ne 0 ]; then
    fail "$case: exit $rc: $(grep error "$work/$case.log" | tail -1)"
    return 1
  fi
  cmp -s "$work/$case.jsonl" "$work/ref${m#m}.jsonl" || fail "$case: output differs from the reference engine's"
}
measured() { grep -oE "profile \[[0-9]+/[0-9]+\]: [^(]*" "$work/$1.log" | sed 's/ *$//' | tr '\n' ';'; }
profile() { ls "$XDG_CACHE_HOME"/flexgen/profile-*.json 2>/dev/null; }

# 1. fits the GPU
if run fits m --offload-dir "$work/off"; then
  grep -q "no profile needed" "$work/fits.log" || fail "fits: the log does not say no profile was needed"
  [ -z "$(profile)" ] || fail "fits: a profile was written: $(profile)"
  [ -z "$(measured fits)" ] || fail "fits: measured $(measured fits)"
  echo "ok   everything fits the GPU: no profile"
fi

# 2. the CPU holds the rest: the tiers, no disk
if run cpu m --gpu-mem 300K --cpu-mem 64M --offload-dir "$work/deep/a/b"; then
  what=$(measured cpu)
  case "$what" in *"the gpu tier"*"the cpu tier"*) ;; *) fail "cpu: measured '$what', expected the gpu and cpu tiers" ;; esac
  case "$what" in *disk*) fail "cpu: the disk was measured though nothing goes there: $what" ;; esac
  [ -d "$work/deep/a/b" ] || fail "cpu: the offload directory was not created"
  "$py" -c 'import json, sys; p = json.load(open(sys.argv[1])); assert "disk" not in p and len(p["shapes"]) == 1, p.keys()' \
    "$(profile)" || fail "cpu: the profile has a disk section or not one shape"
  echo "ok   offloaded to the CPU: measured $what"
fi

# 3. the disk too: only the disk now, sized to the store
if run disk m --gpu-mem 300K --cpu-mem 250K --offload-dir "$work/deep/a/b"; then
  what=$(measured disk)
  case "$what" in "profile [1/1]: the disk"*) ;; *) fail "disk: measured '$what', expected the disk alone" ;; esac
  grep -q "disk 0*[1-9]" <(grep -o "weights gpu/cpu/disk [0-9/]*" "$work/disk.log" | head -1) ||
    echo "note disk: the search put no weights on disk ($(grep -o 'weights gpu/cpu/disk [0-9/]*' "$work/disk.log" | head -1))"
  "$py" -c 'import json, sys; d = json.load(open(sys.argv[1]))["disk"]; assert d["file_bytes"] == 256 << 20, d["file_bytes"]' \
    "$(profile)" || fail "disk: the test file is not the smallest size (the store is tiny)"
  echo "ok   disk needed: measured $what"
fi

# 4. another shape: nothing measured, the nearest shape's figures
if run shape m2 --gpu-mem 700K --cpu-mem 64M --offload-dir "$work/deep/a/b"; then
  [ -z "$(measured shape)" ] || fail "shape: measured $(measured shape)"
  grep -q "policy auto (.*profile-" "$work/shape.log" || fail "shape: the search did not read the cached profile"
  grep -q "the gpu figures of the measured layer shape nearest" "$work/shape.log" ||
    fail "shape: the log does not say whose shape's figures it took"
  echo "ok   another shape: nothing measured"
fi
# 5. a Llama-family shape: measured at its own
"$py" "$ref/make_llama_checkpoint.py" --out "$work/m3" --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 160 \
  --vocab 300 --max-pos 64 --seed 5 >/dev/null || exit 1
"$flexgen" run --engine reference --model "$work/m3" "${common[@]}" --out "$work/ref3.jsonl" 2>/dev/null || exit 1
if run llama m3 --gpu-mem 300K --cpu-mem 64M --offload-dir "$work/deep/a/b"; then
  what=$(measured llama)
  case "$what" in "profile [1/1]: the gpu tier"*) ;; *) fail "llama: measured '$what', expected the gpu tier alone" ;; esac
  "$py" -c 'import json, sys
s = json.load(open(sys.argv[1]))["shapes"][-1]
assert (s["hidden"], s["q_dim"], s["kv_dim"], s["ffn"], s["ffn_kind"]) == (64, 64, 32, 160, 1), s' "$(profile)" ||
    fail "llama: the profile's new shape is not the model's own"
  ! grep -q "the gpu figures of the measured layer shape nearest" "$work/llama.log" ||
    fail "llama: the run took another shape's figures"
  echo "ok   a Llama shape after OPT's: measured $what"
fi
[ $fails -eq 0 ] && echo "first_run: passed" || echo "first_run: $fails failed"
exit $((fails > 0))
