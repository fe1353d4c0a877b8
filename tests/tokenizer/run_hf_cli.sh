#!/usr/bin/env bash
# run_hf_cli.sh CACHE WORK - `flexgen tokenize` and `flexgen run` with real
# tokenizer.json models (run by run_hf.sh cli, which fetches them):
#  - `tokenize --prompts FILE` (text and JSONL) gives, per prompt, the ids the
#    JavaScript oracle gives with special tokens (BOS, <|im_start|>, ...);
#  - stdin: the same ids, --no-bos without the template's tokens, --decode
#    back to the text, --split-special keeps special tokens as text;
#  - `flexgen run --prompts` on a tiny OPT checkpoint that carries Llama 2's
#    tokenizer.json: the same outputs as `--prompt-ids` of those ids, and
#    prompt_tokens counts them (so run feeds what tokenize prints);
#  - a tokenizer.json with an unsupported part: exit 2 naming file and part.
# Environment: FLEXGEN, FG_SRC, FG_PYTHON.
set -uo pipefail
cache=$1 work=$2
flexgen=${FLEXGEN:?path of flexgen}
here=$(cd "$(dirname "$0")" && pwd)
src=${FG_SRC:-$(cd "$here/../.." && pwd)}
py=${FG_PYTHON:-/usr/bin/python3}
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# prompts: plain text and JSONL, from one list (the oracle encodes the list)
"$py" - "$work" <<'PY'
import json, sys
w = sys.argv[1]
p = ["Hello world", "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
     "<s>[INST] Bonjour, ça va ? [/INST]", "  leading spaces and\ttabs", "日本語のテキスト 🤖👍🏽",
     "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "don't  stop 12345"]
open(f"{w}/p.txt", "w").write("".join(s + "\n" for s in p if "\n" not in s))  # one prompt a line
open(f"{w}/p.jsonl", "w").write("".join(json.dumps({"id": i, "prompt": s}) + "\n" for i, s in enumerate(p)))
json.dump(p, open(f"{w}/p.json", "w"))
PY

for name in llama2 llama3 qwen3; do
  d=$cache/$name
  node "$here/hf_oracle.js" "$cache/tokenizers-js/main.js" "$d" "$work/p.json" "$work/$name.js.json" || exit 1
  for f in p.txt p.jsonl; do
    "$flexgen" tokenize --model "$d" --prompts "$work/$f" >"$work/$name.$f.ids" 2>"$work/err" ||
      fail "$name tokenize --prompts $f: $(cat "$work/err")"
  done
  "$py" - "$work" "$name" "$flexgen" "$d" <<'PY' || fails=$((fails + 1))
import json, subprocess, sys
w, name, flexgen, d = sys.argv[1:]
p = json.load(open(f"{w}/p.json"))
js = [o["ids"] for o in json.load(open(f"{w}/{name}.js.json"))]
for f in ("p.txt", "p.jsonl"):
    got = [json.loads(l) for l in open(f"{w}/{name}.{f}.ids")]
    want = js if f == "p.jsonl" else [ids for s, ids in zip(p, js) if "\n" not in s]
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert len(got) == len(want) and not bad, f"{name} --prompts {f}: {len(got)} prompts, want {len(want)}; {bad[:1]}"
def tok(*args, text):
    return subprocess.run([flexgen, "tokenize", "--model", d, *args], input=text.encode(), capture_output=True,
                          check=True).stdout.decode()
pre = {"llama2": [1]}.get(name, [])
for s, ids in [(p[k], js[k]) for k in (1, 4, 6)]:   # each call loads the tokenizer: a few prompts only
    assert json.loads(tok(text=s)) == ids, (name, s)
    plain = json.loads(tok("--no-bos", text=s))
    assert plain == ids[len(pre):], (name, "--no-bos", s)
    back = tok("--decode", "--keep-special", text=json.dumps(plain))
    want = s if name != "qwen3" else __import__("unicodedata").normalize("NFC", s)
    if name == "llama2" and "<s>" in s:   # SentencePiece: a section after <s> starts with its own "▁"
        continue
    assert back == want, (name, back, want)
split = json.loads(tok("--no-bos", "--split-special", text="<|im_start|>"))
assert len(split) > 1, (name, split)
print(f"run_hf_cli: {name}: tokenize --prompts (text, JSONL) == oracle for {len(p)} prompts; stdin, --no-bos, "
      f"--decode (3 prompts), --split-special ok")
PY
done

# flexgen run feeds what tokenize prints: a tiny OPT checkpoint with Llama 2's tokenizer.json
m=$work/model
"$py" "$src/tests/ref/make_checkpoint.py" --out "$m" --layers 1 --hidden 16 --heads 2 --ffn 32 --vocab 32000 \
  --max-pos 128 --seed 3 >/dev/null || exit 1
cp "$cache/llama2/tokenizer.json" "$cache/llama2/tokenizer_config.json" "$m/"
cp "$work/p.txt" "$work/q.txt"
"$flexgen" tokenize --model "$m" --prompts "$work/q.txt" >"$work/q.ids" || fail "tokenize --prompts on the model dir"
"$py" -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])]))' "$work/q.ids" >"$work/q.json"
common=(--engine reference --gen-len 3 --ignore-eos)
"$flexgen" run --model "$m" --prompts "$work/q.txt" "${common[@]}" --out "$work/t.jsonl" 2>"$work/err" ||
  fail "run --prompts: $(tail -3 "$work/err")"
"$flexgen" run --model "$m" --prompt-ids "$work/q.json" "${common[@]}" --out "$work/i.jsonl" 2>"$work/err" ||
  fail "run --prompt-ids: $(tail -3 "$work/err")"
"$py" - "$work" <<'PY' || fails=$((fails + 1))
import json, sys
w = sys.argv[1]
ids = json.load(open(f"{w}/q.json"))
t = [json.loads(l) for l in open(f"{w}/t.jsonl")]
i = [json.loads(l) for l in open(f"{w}/i.jsonl")]
assert len(t) == len(i) == len(ids) == 5, (len(t), len(i), len(ids))
for k, (a, b) in enumerate(zip(t, i)):
    assert a["prompt_tokens"] == len(ids[k]) and a["output_ids"] == b["output_ids"], (k, a, b)
print(f"run_hf_cli: flexgen run --prompts == --prompt-ids of tokenize --prompts ({sum(map(len, ids))} prompt tokens)")
PY

# refused: a WordPiece tokenizer.json
mkdir -p "$work/wp"
echo '{"model": {"type": "WordPiece", "vocab": {"a": 0}}, "decoder": null}' >"$work/wp/tokenizer.json"
echo hi | "$flexgen" tokenize --model "$work/wp" >/dev/null 2>"$work/err"
rc=$?
[ $rc = 2 ] && grep -qF "$work/wp/tokenizer.json: model type 'WordPiece' is not supported" "$work/err" ||
  fail "WordPiece: exit $rc: $(cat "$work/err")"

[ $fails = 0 ] && echo "run_hf_cli: all passed" || echo "run_hf_cli: $fails failed"
exit $((fails > 0))
