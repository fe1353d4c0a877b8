#!/usr/bin/env bash
# `flexgen run --prompts`: text in, text out. On a random checkpoint with a
# synthetic byte-level BPE vocabulary:
#  - each prompt is encoded as `flexgen tokenize` encodes it (BOS first), and
#    generation from the text equals generation from those ids;
#  - JSONL ids come back as given; output text decodes the output ids;
#  - --stop ends a sequence at the first occurrence and cuts the completion;
#  - bad prompt files exit 2 naming FILE:LINE; over-long prompts are refused,
#    or cut from the left with --truncate.
# Usage: text_run.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
m=$work/model
"$py" "$ref/make_checkpoint.py" --out "$m" --layers 2 --hidden 64 --heads 4 --ffn 256 --vocab 1000 \
  --max-pos 64 --seed 11 --synth-vocab >/dev/null || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

printf 'hello world\nThe quick brown fox, "jumps" \\ over\n\nlast one\n' >"$work/p.txt"
"$flexgen" run --policy default --model "$m" --prompts "$work/p.txt" --gen-len 6 --ignore-eos --out "$work/t.jsonl" 2>"$work/err" \
  || fail "text run: $(cat "$work/err")"
# the same prompts as ids, from the tokenize command
"$py" - "$flexgen" "$m" "$work" <<'PY' || fails=$((fails + 1))
import json, subprocess, sys
flexgen, m, work = sys.argv[1:]
lines = open(f"{work}/p.txt").read().split("\n")[:-1]
ids = [json.loads(subprocess.run([flexgen, "tokenize", "--model", m], input=l.encode(), capture_output=True,
                                 check=True).stdout) for l in lines]
json.dump(ids, open(f"{work}/ids.json", "w"))
subprocess.run([flexgen, "run", "--policy", "default", "--model", m, "--prompt-ids", f"{work}/ids.json", "--gen-len", "6", "--ignore-eos",
                "--out", f"{work}/i.jsonl"], check=True, capture_output=True)
t = [json.loads(l) for l in open(f"{work}/t.jsonl")]
i = [json.loads(l) for l in open(f"{work}/i.jsonl")]
assert len(t) == len(lines) == 4, len(t)
for k, (a, b) in enumerate(zip(t, i)):
    assert a["id"] == k and a["prompt"] == lines[k], (a["id"], a["prompt"])
    assert a["prompt_tokens"] == len(ids[k]) and ids[k][0] == 2, (k, a["prompt_tokens"], ids[k][:2])
    assert a["output_ids"] == b["output_ids"], f"prompt {k}: text run {a['output_ids']} != ids run {b['output_ids']}"
    dec = subprocess.run([flexgen, "tokenize", "--model", m, "--decode"], input=json.dumps(a["output_ids"]).encode(),
                         capture_output=True, check=True).stdout.decode()
    assert a["completion"] == dec, (k, a["completion"], dec)
print("text_run: text prompts = tokenize + ids; completions decode the ids")
PY

# stop string: the text of output tokens 2..3 of prompt 0
stop=$("$py" -c 'import json,sys; print(json.dumps(json.loads(open(sys.argv[1]).readline())["output_ids"][2:4]))' "$work/t.jsonl" \
  | "$flexgen" tokenize --model "$m" --decode)
"$flexgen" run --policy default --model "$m" --prompts "$work/p.txt" --gen-len 6 --ignore-eos --stop "$stop" --out "$work/s.jsonl" 2>/dev/null \
  || fail "stop run"
"$py" - "$work" "$stop" <<'PY' || fails=$((fails + 1))
import json, sys
work, stop = sys.argv[1], sys.argv[2]
full = json.loads(open(f"{work}/t.jsonl").readline())
s = json.loads(open(f"{work}/s.jsonl").readline())
assert s["finish_reason"] == "stop", s
cut = full["completion"].find(stop)
assert cut >= 0 and s["completion"] == full["completion"][:cut], (s["completion"], full["completion"], stop)
assert s["output_tokens"] <= 4 and s["output_ids"] == full["output_ids"][:s["output_tokens"]], s
print(f"text_run: --stop {stop!r} ended prompt 0 after {s['output_tokens']} tokens")
PY

# JSONL ids of any JSON type come back unchanged
printf '{"id": "q-1", "prompt": "low"}\n\n{"id": {"k": [1, 2]}, "prompt": "lower"}\n' >"$work/p.jsonl"
"$flexgen" run --policy default --model "$m" --prompts "$work/p.jsonl" --gen-len 2 --out "$work/j.jsonl" 2>/dev/null || fail "jsonl run"
[ "$(cut -d, -f1 "$work/j.jsonl" | tr '\n' ' ')" = '{"id":"q-1" {"id":{"k":[1 ' ] || fail "jsonl ids: $(cat "$work/j.jsonl")"

# bad input: exit 2, message names FILE:LINE
expect2() { # NAME WANT-IN-MESSAGE args...
  local name=$1 want=$2
  shift 2
  "$flexgen" run --policy default --model "$m" --gen-len 4 --out "$work/bad.jsonl" "$@" >/dev/null 2>"$work/err"
  local rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$want" "$work/err"; then fail "$name: exit $rc, message: $(cat "$work/err")"
  elif [ -e "$work/bad.jsonl" ]; then fail "$name: output left behind"
  else echo "ok   $name: $(grep error: "$work/err")"; fi
}
printf 'fine\nbad \xff\xfe byte\n' >"$work/u.txt"
expect2 invalid_utf8 "u.txt:2" --prompts "$work/u.txt"
: >"$work/e.txt"
expect2 empty_file "e.txt" --prompts "$work/e.txt"
printf '{"id": 1, "prompt": "a"}\n{"id": 2, "prompt": }\n' >"$work/m.jsonl"
expect2 malformed_jsonl "m.jsonl:2" --prompts "$work/m.jsonl"
printf '{"id": 1, "text": "a"}\n' >"$work/k.jsonl"
expect2 jsonl_no_prompt "k.jsonl:1" --prompts "$work/k.jsonl"
"$py" -c 'print("short"); print(" ".join(["low"] * 80))' >"$work/long.txt"
expect2 too_long "long.txt:2" --prompts "$work/long.txt"
"$flexgen" run --policy default --model "$m" --prompts "$work/long.txt" --gen-len 4 --truncate --out "$work/tr.jsonl" 2>"$work/err" \
  || fail "truncate run: $(cat "$work/err")"
grep -q "cut from" "$work/err" || fail "--truncate did not report the cut"
[ "$(sed -n 2p "$work/tr.jsonl" | grep -o '"prompt_tokens":[0-9]*')" = '"prompt_tokens":60' ] \
  || fail "--truncate: want 60 prompt tokens (64 positions - 4 new): $(sed -n 2p "$work/tr.jsonl" | cut -c1-200)"

echo "text_run: $fails failed"
[ $fails -eq 0 ] && rm -rf "$work"
[ $fails -eq 0 ]
