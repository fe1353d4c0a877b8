#!/usr/bin/env bash
# chat_run.sh - "messages" prompts through `flexgen run` (and `flexgen
# policy`), on a random checkpoint with a synthetic byte-level BPE
# vocabulary (no network):
#  - the prompt file keeps a conversation (test_prompts), and a messages line
#    is rendered with the model's chat template (tokenizer_config.json, a
#    string, a {"content"} special token, a list of named templates, or
#    chat_template.jinja; --chat-template FILE over all of them) with
#    add_generation_prompt: the output's "prompt" is the rendering, its ids
#    are the rendering's (no BOS added: the template writes it), so a run on
#    those ids gives the same tokens; a plain prompt beside it keeps its BOS;
#  - refusals, exit 2 naming FILE:LINE: both or neither of prompt and
#    messages, malformed messages, no template, a template that raises, a
#    template with an unsupported construct (named with its line).
# Usage: chat_run.sh FLEXGEN TEST_PROMPTS WORKDIR
set -uo pipefail
flexgen=$1 prompts_tool=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
ref=$here/../ref
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
m=$work/model
"$py" "$ref/make_checkpoint.py" --out "$m" --layers 1 --hidden 32 --heads 2 --ffn 64 --vocab 600 \
  --max-pos 96 --seed 5 --synth-vocab >/dev/null || exit 1
fails=0 oks=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; oks=$((oks + 1)); }
run() { "$flexgen" run --engine reference --gen-len 3 --ignore-eos "$@"; }

T='{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content|trim }}{{ eos_token }}
{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}'
"$py" - "$m/tokenizer_config.json" "$T" <<'PY'
import json, sys
json.dump({"bos_token": {"content": "<s>", "lstrip": False}, "eos_token": "</s>", "chat_template": sys.argv[2]},
          open(sys.argv[1], "w"))
PY
cat >"$work/p.jsonl" <<'EOF'
{"id": "c1", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " low lower \n"}]}
{"id": "plain", "prompt": "low lower"}
{"messages": [{"role": "user", "content": "caf\u00e9 {{ x }} {% y %} \\ \"q\"", "name": "kept"}]}
EOF

# the prompt file keeps conversations as JSON
"$prompts_tool" "$work/p.jsonl" >"$work/read.txt" 2>&1 && grep -qF '"prompt": "", "messages": [{"role":"system","content":"Be brief."}' "$work/read.txt" \
  && ok "prompt file keeps messages" || fail "prompt file: $(cat "$work/read.txt")"

# rendered with tokenizer_config.json's template, ids are the rendering's
run --model "$m" --prompts "$work/p.jsonl" --out "$work/o.jsonl" 2>"$work/err" || fail "chat run: $(cat "$work/err")"
"$py" - "$flexgen" "$m" "$work" <<'PY' && ok "rendered prompt, its ids, same tokens as --prompt-ids" || fails=$((fails + 1))
import json, subprocess, sys
flexgen, m, work = sys.argv[1:]
out = [json.loads(l) for l in open(f"{work}/o.jsonl")]
want = ["<s><|system|>Be brief.</s>\n<|user|>low lower</s>\n<|assistant|>", "low lower",
        "<s><|user|>caf\u00e9 {{ x }} {% y %} \\ \"q\"</s>\n<|assistant|>"]
assert [o["prompt"] for o in out] == want, [o["prompt"] for o in out]
def tok(text, bos):
    return json.loads(subprocess.run([flexgen, "tokenize", "--model", m] + ([] if bos else ["--no-bos"]),
                                     input=text.encode(), capture_output=True, check=True).stdout)
ids = [tok(want[0], False), tok(want[1], True), tok(want[2], False)]
for o, i in zip(out, ids):
    assert o["prompt_tokens"] == len(i), (o["id"], o["prompt_tokens"], len(i))
json.dump(ids, open(f"{work}/ids.json", "w"))
subprocess.run([flexgen, "run", "--engine", "reference", "--gen-len", "3", "--ignore-eos", "--model", m,
                "--prompt-ids", f"{work}/ids.json", "--out", f"{work}/i.jsonl"], check=True, capture_output=True)
byids = [json.loads(l) for l in open(f"{work}/i.jsonl")]
assert [o["output_ids"] for o in out] == [o["output_ids"] for o in byids]
PY

# --chat-template FILE over the model's
printf '{%% for m in messages %%}[{{ m.role|upper }}] {{ m.content }}{%% if m.name is defined %%} ({{ m.name }}){%% endif %%}\n{%% endfor %%}' >"$work/t.jinja"
# (trim_blocks: the newline after a tag is not output)
prompt_is() { # OUT.jsonl INDEX WANT: the output's prompt
  "$py" -c 'import json,sys; o=[json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2])]["prompt"]; sys.exit(o != sys.argv[3] and print(repr(o)) is None)' "$@"
}
run --model "$m" --prompts "$work/p.jsonl" --chat-template "$work/t.jinja" --out "$work/o2.jsonl" 2>"$work/err" \
  && prompt_is "$work/o2.jsonl" 0 $'[SYSTEM] Be brief.[USER]  low lower \n' && prompt_is "$work/o2.jsonl" 2 $'[USER] caf\u00e9 {{ x }} {% y %} \\ "q" (kept)' \
  && ok "--chat-template FILE" || fail "--chat-template: $(cat "$work/err")"

# a list of named templates: "default"; chat_template.jinja before tokenizer_config.json
"$py" - "$m/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = [{"name": "tool_use", "template": "TOOLS"}, {"name": "default", "template": "D{{ messages|length }}"}]
json.dump(c, open(sys.argv[1], "w"))
PY
run --model "$m" --prompts "$work/p.jsonl" --out "$work/o3.jsonl" 2>"$work/err" \
  && prompt_is "$work/o3.jsonl" 0 D2 && ok "named templates: default" \
  || fail "named templates: $(head -c 200 "$work/o3.jsonl") $(cat "$work/err")"
printf 'J{{ bos_token }}{{ eos_token }}' >"$m/chat_template.jinja"
run --model "$m" --prompts "$work/p.jsonl" --out "$work/o4.jsonl" 2>"$work/err" \
  && prompt_is "$work/o4.jsonl" 0 'J<s></s>' && ok "chat_template.jinja first" \
  || fail "chat_template.jinja: $(head -c 200 "$work/o4.jsonl") $(cat "$work/err")"
rm "$m/chat_template.jinja"

# flexgen policy reads the same prompts
"$flexgen" policy --model "$m" --prompts "$work/p.jsonl" --chat-template "$work/t.jinja" --gen-len 3 --hardware flexgen-t4 \
  --json >"$work/pol.json" 2>"$work/err" && ok "flexgen policy --prompts with messages" || fail "policy: $(cat "$work/err")"

# refusals: exit 2, naming FILE:LINE, and no output left behind
expect2() { # NAME WANT-IN-MESSAGE args...
  local name=$1 want=$2
  shift 2
  run --out "$work/bad.jsonl" "$@" >/dev/null 2>"$work/err"
  local rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$want" "$work/err"; then fail "$name: exit $rc, message: $(cat "$work/err")"
  elif [ -e "$work/bad.jsonl" ]; then fail "$name: output left behind"
  else ok "$name: $(grep error: "$work/err")"; fi
}
bad() { printf '{"prompt": "fine"}\n%s\n' "$2" >"$work/$1.jsonl"; }
refused() { # FILE LINE2 NAME WANT: a prompts file FILE.jsonl whose line 2 is LINE2 is refused, naming it
  bad "$1" "$2"
  expect2 "$3" "$1.jsonl:2: $4" --model "$m" --prompts "$work/$1.jsonl"
}
refused both '{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}' "both prompt and messages" \
  'both "prompt" and "messages": give one'
refused neither '{"id": 3}' "neither" 'missing "prompt" (or "messages")'
refused str '{"messages": "hi"}' "messages not a list" '"messages" must be a non-empty list'
refused empty '{"messages": []}' "empty messages" \
  '"messages" must be a non-empty list of {"role": ..., "content": ...}, got an empty list'
refused item '{"messages": [{"role": "user", "content": "a"}, ["user", "b"]]}' "a message not an object" \
  '"messages"[1] must be an object, got an array'
refused role '{"messages": [{"content": "a"}]}' "no role" '"messages"[0]: "role" must be a string, got nothing'
refused content '{"messages": [{"role": "user", "content": 5}]}' "content not a string" \
  '"messages"[0]: "content" must be a string, got a number'
bad ok '{"messages": [{"role": "user", "content": "a"}]}'
printf '{%% if messages|length > 0 %%}{{ raise_exception("Only system messages here") }}{%% endif %%}' >"$work/raise.jinja"
expect2 "the template raises" "ok.jsonl:2: rendering the chat template: $work/raise.jinja:1: raise_exception: Only system messages here" \
  --model "$m" --prompts "$work/ok.jsonl" --chat-template "$work/raise.jinja"
printf 'fine\n\n{%% for m in messages %%}{{ m.content|wordwrap(5) }}{%% endfor %%}' >"$work/wrap.jinja"
expect2 "unsupported construct" "$work/wrap.jinja:3: unsupported filter 'wordwrap'" --model "$m" --prompts "$work/ok.jsonl" \
  --chat-template "$work/wrap.jinja"
printf '{"chat_template": "a\\n{{ messages|wordwrap }}"}' >"$m/tokenizer_config.json"
expect2 "unsupported construct in tokenizer_config.json" "$m/tokenizer_config.json:chat_template:2: unsupported filter 'wordwrap'" \
  --model "$m" --prompts "$work/ok.jsonl"
rm "$m/tokenizer_config.json"
expect2 "no chat template" "ok.jsonl:2: a \"messages\" prompt needs the chat template: $m has no chat template" \
  --model "$m" --prompts "$work/ok.jsonl"
printf '{"prompt": "a plain file needs none"}\n' >"$work/plain.jsonl"
run --model "$m" --prompts "$work/plain.jsonl" --out "$work/o5.jsonl" 2>"$work/err" && ok "plain prompts need no template" \
  || fail "plain prompts: $(cat "$work/err")"

echo "$oks passed, $fails failed"
[ $fails = 0 ]
