#!/usr/bin/env bash
# run_gguf.sh - every BPE ("gpt2") and SentencePiece ("llama") vocabulary of
# llama.cpp's models/ against its .out vectors (test_tok_gguf); the ones of
# other types, and vocabularies the loader cannot take (a byte-level
# vocabulary missing some byte's token), are refused (exit 2) with a message
# naming the key or the part, which is printed; any differing id fails.
set -uo pipefail
rc=0; dir=$("$FG_SRC/scripts/fetch-llamacpp-vocabs.sh") || rc=$?
[ "$rc" = 3 ] && { echo "skip: llama.cpp's vocabularies cannot be fetched"; exit 77; }
[ "$rc" = 0 ] || exit 1
fail=0
if [ "${1:-}" = cli ]; then
  # flexgen tokenize on a GGUF file alone: "Hello world" is 15043 3186 in
  # llama.cpp's llama-spm vectors, and BOS (1) goes first as llama.cpp adds it
  got=$(printf 'Hello world' | "$FLEXGEN" tokenize --model "$dir/ggml-vocab-llama-spm.gguf")
  [ "$got" = "[1,15043,3186]" ] || { echo "tokenize llama-spm: got $got"; fail=1; }
  got=$(echo '[1,15043,3186]' | "$FLEXGEN" tokenize --decode --model "$dir/ggml-vocab-llama-spm.gguf")
  [ "$got" = "Hello world" ] || { echo "decode llama-spm: got '$got'"; fail=1; }
  # an unsupported type: exit 2, the key and the value named
  err=$("$FLEXGEN" tokenize --model "$dir/ggml-vocab-bert-bge.gguf" </dev/null 2>&1); r=$?
  [ $r = 2 ] && [[ "$err" == *'tokenizer.ggml.model = "bert"'* ]] ||
    { echo "bert: rc $r: $err"; fail=1; }
  [ $fail = 0 ] && echo "tokenize, decode and refusal on GGUF files: ok"
  exit $fail
fi
empty=$(mktemp); trap 'rm -f "$empty" /tmp/tok_gguf.$$' EXIT
for g in "$dir"/ggml-vocab-*.gguf; do
  if [ -f "$g.inp" ]; then
    "$FG_TEST_TOK_GGUF" "$g" "$g.inp" "$g.out" 2>/tmp/tok_gguf.$$; r=$?
  else
    "$FG_TEST_TOK_GGUF" "$g" "$empty" "$empty" 2>/tmp/tok_gguf.$$ >/dev/null; r=$?
  fi
  if [ $r = 2 ]; then echo "$(basename "$g"): refused: $(cat /tmp/tok_gguf.$$)"
  elif [ $r != 0 ]; then cat /tmp/tok_gguf.$$; fail=1; fi
done
rm -f /tmp/tok_gguf.$$
exit $fail
