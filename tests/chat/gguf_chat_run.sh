#!/usr/bin/env bash
# gguf_chat_run.sh - "messages" prompts on GGUF models of random weights that
# carry a real vocabulary and chat template in their metadata
# (gguf_chat_model.py): llama.cpp's Llama 3 vocabulary (ggml-vocab-llama-bpe)
# with Llama 3's chat template written into tokenizer.chat_template, and
# llama.cpp's Qwen2 vocabulary with the template it carries itself. Against
# gguf_chat_oracle.mjs (node-llama-cpp reads the file and tokenizes,
# @huggingface/jinja renders the file's template):
#  - `flexgen run --model X.gguf --prompts chats.jsonl` renders each
#    conversation as the oracle does (the output's "prompt"), its prompt ids
#    are the oracle's (`flexgen tokenize --prompts`, the run's own encoding,
#    prints them; prompt_tokens is their count; a run on those ids with
#    --prompt-ids generates the same tokens);
#  - --chat-template FILE still wins over the file's template;
#  - a GGUF file without tokenizer.chat_template: a messages prompt is
#    refused (exit 2) naming the file, a plain prompt runs.
# Usage: gguf_chat_run.sh FLEXGEN WORKDIR (exit 77: node-llama-cpp or the
# Jinja oracle cannot be fetched). Environment: FG_PYTHON.
set -uo pipefail
flexgen=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
cache=${FLEXGEN_CACHE:-$HOME/.cache/flexgen}
. "$root/tests/fetch_or_skip.sh"
fetch_or_skip fetch-llamacpp.sh "node-llama-cpp"
fetch_or_skip fetch-llamacpp-vocabs.sh "llama.cpp's vocabularies"
fetch_or_skip fetch-jinja-oracle.sh "@huggingface/jinja and Llama 3's template"
lib=$("$root/scripts/fetch-llamacpp.sh") && vocabs=$("$root/scripts/fetch-llamacpp-vocabs.sh") || exit 1
rm -rf "$work" && mkdir -p "$work"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
mk() { # VOCAB NAME [gguf_chat_model.py flags]
  "$py" "$here/gguf_chat_model.py" --vocab "$vocabs/ggml-vocab-$1.gguf" --out "$work/$2.gguf" "${@:3}" || exit 1
}
mk llama-bpe llama3 --template-config "$cache/jinja/llama3/tokenizer_config.json"
mk qwen2 qwen2
mk llama-bpe bare --no-template
"$py" - "$work/chats.jsonl" <<'PY'
import json, random, sys
r = random.Random(7)
words = ["the", "cache", "GPU", "\"quoted\"", "{braces}", "{{ not a tag }}", "über", "naïve", "日本語", "🙂",
         "a\nnewline", "<|im_start|>", "  spaced  "]
with open(sys.argv[1], "w") as f:
    for i in range(6):
        msgs = [{"role": "system", "content": "You are terse."}] if i % 2 else []
        for t in range(1 + i % 3):
            msgs.append({"role": "user", "content": " ".join(r.choice(words) for _ in range(3 + t))})
            if t < i % 3:
                msgs.append({"role": "assistant", "content": " ".join(r.choice(words) for _ in range(2))})
        f.write(json.dumps({"id": f"c{i}", "messages": msgs}) + "\n")
PY
run() { "$flexgen" run --device host --gen-len 4 --ignore-eos "$@"; }

for m in llama3 qwen2; do
  g=$work/$m.gguf
  node "$here/gguf_chat_oracle.mjs" "$lib" "$cache/jinja/jinja/index.cjs" "$g" "$work/chats.jsonl" "$work/$m.oracle.json" ||
    { fail "$m: the oracle"; continue; }
  "$flexgen" tokenize --model "$g" --prompts "$work/chats.jsonl" >"$work/$m.ids.txt" 2>"$work/$m.err" ||
    { fail "$m: tokenize --prompts: $(tail -1 "$work/$m.err")"; continue; }
  run --model "$g" --prompts "$work/chats.jsonl" --out "$work/$m.out.jsonl" 2>"$work/$m.err" ||
    { fail "$m: run: $(grep error "$work/$m.err")"; continue; }
  "$py" - "$work" "$m" <<'PY' || { fail "$m: prompts differ from the oracle's"; continue; }
import json, sys
w, m = sys.argv[1:]
orc = json.load(open(f"{w}/{m}.oracle.json"))
ids = [json.loads(l) for l in open(f"{w}/{m}.ids.txt")]
out = [json.loads(l) for l in open(f"{w}/{m}.out.jsonl")]
bad = 0
for i, (o, p, r) in enumerate(zip(orc["prompts"], ids, out)):
    if r["prompt"] != o["text"]:
        print(f"{m} chat {i}: rendering {r['prompt'][:120]!r} vs the oracle's {o['text'][:120]!r}"); bad += 1
    if p != o["ids"] or r["prompt_tokens"] != len(p):
        k = next((j for j in range(min(len(p), len(o["ids"]))) if p[j] != o["ids"][j]), None)
        print(f"{m} chat {i}: ids differ at {k}: ours {len(p)} ({r['prompt_tokens']} in the run), oracle {len(o['ids'])}"); bad += 1
if len(ids) != len(orc["prompts"]) or len(out) != len(ids):
    print(f"{m}: {len(ids)} id lists, {len(out)} outputs, {len(orc['prompts'])} oracle prompts"); bad += 1
json.dump(ids, open(f"{w}/{m}.ids.json", "w"))
n = sum(len(p) for p in ids)
print(f"{m}: {len(ids)} conversations, {n} prompt ids: {'identical to' if not bad else 'NOT'} the oracle's; "
      f"bos {orc['bos']!r}, template {len(orc['template'])} characters")
sys.exit(1 if bad else 0)
PY
  run --model "$g" --prompt-ids "$work/$m.ids.json" --out "$work/$m.byids.jsonl" 2>"$work/$m.err" &&
    "$py" -c 'import json,sys; a,b=[[json.loads(l)["output_ids"] for l in open(f)] for f in sys.argv[1:]]; sys.exit(a!=b)' \
      "$work/$m.out.jsonl" "$work/$m.byids.jsonl" && ok "$m: the run's prompts are the oracle's ids (same tokens as --prompt-ids)" ||
    fail "$m: --prompt-ids of those ids generates other tokens: $(grep error "$work/$m.err")"
done
# the Llama 3 template as the file holds it (node-llama-cpp's reading) is the one written into it
"$py" -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["template"] != json.load(open(sys.argv[2]))["chat_template"])' \
  "$work/llama3.oracle.json" "$cache/jinja/llama3/tokenizer_config.json" && ok "llama3: tokenizer.chat_template as written" ||
  fail "llama3: the file's template is not Llama 3's"

# --chat-template FILE over the file's own
printf '{%% for m in messages %%}[{{ m.role }}] {{ m.content }}\n{%% endfor %%}' >"$work/t.jinja"
run --model "$work/qwen2.gguf" --prompts "$work/chats.jsonl" --chat-template "$work/t.jinja" --out "$work/o2.jsonl" \
  2>"$work/err" && "$py" -c 'import json,sys; o=json.loads(open(sys.argv[1]).readline())["prompt"]; sys.exit(not o.startswith("[user] "))' \
  "$work/o2.jsonl" && ok "--chat-template FILE over tokenizer.chat_template" || fail "--chat-template: $(cat "$work/err")"

# no tokenizer.chat_template: messages refused naming the file, plain prompts run
run --model "$work/bare.gguf" --prompts "$work/chats.jsonl" --out "$work/bad.jsonl" >/dev/null 2>"$work/err"
rc=$?
want="chats.jsonl:1: a \"messages\" prompt needs the chat template: $work/bare.gguf has no chat template (no tokenizer.chat_template in its metadata): give one with --chat-template FILE"
if [ $rc = 2 ] && grep -qF -- "$want" "$work/err" && [ ! -e "$work/bad.jsonl" ]; then ok "no template: $(grep error: "$work/err")"
else fail "no template: exit $rc: $(cat "$work/err")"; fi
printf '{"prompt": "a plain prompt needs none"}\n' >"$work/plain.jsonl"
run --model "$work/bare.gguf" --prompts "$work/plain.jsonl" --out "$work/o5.jsonl" 2>"$work/err" &&
  ok "no template: plain prompts run" || fail "plain prompts: $(cat "$work/err")"
[ $fails = 0 ] && echo "all passed" || echo "$fails failed"
[ $fails = 0 ]
