#!/usr/bin/env bash
# run_cli.sh - `flexgen tokenize` (also --prompts: BOS first, the context of
# the directory's config.json, --truncate) and the prompts file reader, end to
# end: the output for good input, and exit status 2 with a message naming the
# line for bad input. No network: the tokenizer is the toy vocabulary of test_tokenizer
# (ids in OPT's order: </s> = 2, "low" = 261, "Ġlow" = 262, "er" = 263).
# Environment: FLEXGEN (the flexgen binary), FG_TEST_TOKENIZER, FG_TEST_PROMPTS.
set -uo pipefail
flexgen=${FLEXGEN:?path of flexgen}
tool=${FG_TEST_TOKENIZER:?path of test_tokenizer}
prompts=${FG_TEST_PROMPTS:?path of test_prompts}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0

# check NAME WANT_STATUS WANT_TEXT CMD...: runs CMD (stdin from $work/in), wants
# its exit status, and WANT_TEXT inside stdout+stderr (exactly the stdout
# when WANT_STATUS is 0 and WANT_TEXT starts with '=').
check() {
  local name=$1 want_rc=$2 want=$3
  shift 3
  "$@" <"$work/in" >"$work/out" 2>"$work/err"
  local rc=$?
  local ok=1
  [ "$rc" = "$want_rc" ] || ok=0
  if [ "${want:0:1}" = "=" ]; then
    [ "$(cat "$work/out")" = "${want:1}" ] || ok=0
  else
    grep -qF -- "$want" "$work/out" "$work/err" || ok=0
  fi
  if [ $ok = 1 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $name: exit $rc (want $want_rc), want '$want'"
    sed 's/^/  stdout: /' "$work/out" | head -5
    sed 's/^/  stderr: /' "$work/err" | head -5
  fi
}
input() { printf "$@" >"$work/in"; }
file() { local f="$work/$1"; shift; printf "$@" >"$f"; }

mkdir "$work/toy"
"$tool" toy "$work/toy" || exit 1
m=(--model "$work/toy")

# ---- flexgen tokenize
input 'low lower'
check "encode, OPT BOS" 0 "=[2,261,262,263]" "$flexgen" tokenize "${m[@]}"
check "encode --no-bos" 0 "=[261,262,263]" "$flexgen" tokenize "${m[@]}" --no-bos
input ''
check "empty text" 0 "=[2]" "$flexgen" tokenize "${m[@]}"
input '[2,261,262,263]'
check "decode skips </s>" 0 "=low lower" "$flexgen" tokenize "${m[@]}" --decode
check "decode --keep-special" 0 "=</s>low lower" "$flexgen" tokenize "${m[@]}" --decode --keep-special
input 'caf\xc3\xa9 \xf0\x9f\x98\x80\n  x\r\n'
"$flexgen" tokenize "${m[@]}" <"$work/in" >"$work/ids" &&
  "$flexgen" tokenize "${m[@]}" --decode <"$work/ids" >"$work/back" &&
  cmp -s "$work/in" "$work/back" && pass=$((pass + 1)) || {
  fail=$((fail + 1)); echo "FAIL round trip through the CLI"; }
input 'ok\nab\xc3(\n'
check "invalid UTF-8" 2 "stdin:2: invalid UTF-8 at byte 3 of the line (byte offset 5)" "$flexgen" tokenize "${m[@]}"
input '[1, 2'
check "decode: malformed JSON" 2 "malformed JSON" "$flexgen" tokenize "${m[@]}" --decode
input '{"a": 1}'
check "decode: not an array" 2 "expected a JSON array" "$flexgen" tokenize "${m[@]}" --decode
input '[1, -3]'
check "decode: negative id" 2 "element 1" "$flexgen" tokenize "${m[@]}" --decode
input '[1, 5000]'
check "decode: id outside the vocabulary" 2 "token id 5000 at position 1" "$flexgen" tokenize "${m[@]}" --decode
input ''
check "no tokenizer given" 2 "give --model DIR or --tokenizer FILE (or both), or --gpt2" "$flexgen" tokenize
check "unknown option" 2 "unknown option '--bogus'" "$flexgen" tokenize "${m[@]}" --bogus
check "missing model dir" 2 "/nonexistent/vocab.json" "$flexgen" tokenize --model /nonexistent
check "--help" 0 "usage: flexgen tokenize" "$flexgen" tokenize --help

# ---- tokenize --prompts: what `flexgen run` feeds (fg_prompt_encode), BOS first
input ''
file tp 'low lower

low
'
check "--prompts: one array a prompt" 0 '=[2,261,262,263]
[2]
[2,261]' "$flexgen" tokenize "${m[@]}" --prompts "$work/tp"
check "--prompts: not with --no-bos" 2 "--prompts prints what" "$flexgen" tokenize "${m[@]}" --prompts "$work/tp" --no-bos
# the context comes from the directory's config.json: 6 positions, --gen-len 3 leaves 3
cp -r "$work/toy" "$work/toyc"
printf '{"model_type": "opt", "vocab_size": 300, "hidden_size": 8, "num_attention_heads": 2, "ffn_dim": 16,
  "num_hidden_layers": 1, "max_position_embeddings": 6, "word_embed_proj_dim": 8, "do_layer_norm_before": true,
  "activation_function": "relu", "bos_token_id": 2, "eos_token_id": 2, "pad_token_id": 1}\n' >"$work/toyc/config.json"
check "--prompts: too long for the context" 2 "tp:1: the prompt is 4 tokens; with --gen-len 3 the model's 6 positions allow 3" \
  "$flexgen" tokenize --model "$work/toyc" --prompts "$work/tp" --gen-len 3
check "--prompts --truncate: cut from the left, BOS kept" 0 '=[2,262,263]
[2]
[2,261]' "$flexgen" tokenize --model "$work/toyc" --prompts "$work/tp" --gen-len 3 --truncate

# ---- prompts files
input ''
file p1 'hello\nworld\n'
check "text: one prompt a line" 0 '={"id": 0, "line": 1, "prompt": "hello"}
{"id": 1, "line": 2, "prompt": "world"}
# text, 2 prompts' "$prompts" "$work/p1"
file p2 'a\r\n\r\nb'
check "text: CRLF, empty middle line, no final newline" 0 '={"id": 0, "line": 1, "prompt": "a"}
{"id": 1, "line": 2, "prompt": ""}
{"id": 2, "line": 3, "prompt": "b"}
# text, 3 prompts' "$prompts" "$work/p2"
file p2b ' \n\nx\n\n\r\n\n'
check "text: empty lines at the end dropped, blank ones kept" 0 '={"id": 0, "line": 1, "prompt": " "}
{"id": 1, "line": 2, "prompt": ""}
{"id": 2, "line": 3, "prompt": "x"}
# text, 3 prompts' "$prompts" "$work/p2b"
file p3 '{"id": "x", "prompt": "hi"}\n\n  {"prompt": "caf\\u00e9\\n", "extra": 1}\n{"id": [1, {"k": null}], "prompt": ""}\n'
check "jsonl: ids kept, default id is the line index" 0 '={"id": "x", "line": 1, "prompt": "hi"}
{"id": 2, "line": 3, "prompt": "caf\u00E9\n"}
{"id": [1,{"k":null}], "line": 4, "prompt": ""}
# jsonl, 3 prompts' "$prompts" "$work/p3"
file p4 '\xef\xbb\xbf{"prompt": "bom"}\n'
check "jsonl after a byte order mark" 0 '={"id": 0, "line": 1, "prompt": "bom"}
# jsonl, 1 prompts' "$prompts" "$work/p4"
file e1 ''
check "empty file" 2 "e1:1: no prompts" "$prompts" "$work/e1"
file e2 '\n  \n\n'
check "blank file" 2 "e2:1: no prompts" "$prompts" "$work/e2"
file e3 '{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": "c"\n'
check "jsonl: malformed line" 2 "e3:3: malformed JSON" "$prompts" "$work/e3"
file e4 '{"prompt": "a"}\n{"id": 7}\n'
check "jsonl: missing prompt" 2 'e4:2: missing "prompt"' "$prompts" "$work/e4"
file e5 '{"id": 1, "prompt": 42}\n'
check "jsonl: prompt not a string" 2 'e5:1: "prompt" must be a string, got a number' "$prompts" "$work/e5"
file e6 '{"prompt": "a"}\n[1, 2]\n'
check "jsonl: line not an object" 2 "e6:2: expected a JSON object" "$prompts" "$work/e6"
file e7 '{"prompt": "a", "prompt": "b"}\n'
check "jsonl: duplicate key" 2 "e7:1: malformed JSON" "$prompts" "$work/e7"
file e8 'fine\nbad \xff byte\n'
check "text: invalid UTF-8" 2 "e8:2: invalid UTF-8 at byte 5 of the line" "$prompts" "$work/e8"
file e9 '{"prompt": "a"}\n{"prompt": "\xc3"}\n'
check "jsonl: invalid UTF-8" 2 "e9:2: invalid UTF-8" "$prompts" "$work/e9"
check "missing file" 2 "cannot open" "$prompts" "$work/nonexistent"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
