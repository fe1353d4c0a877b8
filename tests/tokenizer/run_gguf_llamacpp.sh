#!/usr/bin/env bash
# run_gguf_llamacpp.sh - the GGUF tokenizer against llama.cpp's own (through
# node-llama-cpp, gguf_llamacpp_oracle.mjs) on the corpus of this machine's
# documents the tokenizer.json tests use (gen_hf_corpus.py), for llama.cpp's
# vocabularies models/ggml-vocab-NAME.gguf: ids identical with special tokens
# in the text taken as text and as special tokens, no BOS on either side;
# our decoding of them identical to llama.cpp's detokenization (after its
# clean-up of spaces where llama.cpp applies one); and
# decode(encode(x)) == x (test_tok_gguf corpus; KIND below: every document
# for the byte-level BPE vocabularies, those without U+2581 for
# SentencePiece's). Exit 77 (ctest: skipped) when node-llama-cpp cannot be
# fetched. Environment: FG_SRC, FG_PYTHON, FG_TEST_TOK_GGUF.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${FG_SRC:-$(cd "$here/../.." && pwd)}
py=${FG_PYTHON:-/usr/bin/python3}
tool=${FG_TEST_TOK_GGUF:?FG_TEST_TOK_GGUF: path of test_tok_gguf}
. "$src/tests/fetch_or_skip.sh"
fetch_or_skip fetch-llamacpp.sh "node-llama-cpp"
fetch_or_skip fetch-llamacpp-vocabs.sh "llama.cpp's vocabularies"
lib=$("$src/scripts/fetch-llamacpp.sh") && dir=$("$src/scripts/fetch-llamacpp-vocabs.sh") || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# NAME:KIND (test_tok_gguf.c): llama-spm is SentencePiece, the rest byte-level
# BPE; llama.cpp cleans up spaces when it detokenizes llama-bpe and gpt-2
# (clean_spaces, kept true for their pre-tokenizers in src/llama-vocab.cpp)
vocabs=(llama-spm:no-u2581 llama-bpe:all+clean qwen2:all deepseek-llm:all gpt-2:all+clean)
"$py" "$here/gen_hf_corpus.py" "$work/corpus.json" --max-kb "${FG_GGUF_CORPUS_KB:-400}" || exit 1
# and a few short texts on the edges of llama.cpp's regexes: non-ASCII white
# space next to the classes that exclude it (deepseek's U+3000 and
# U+0800-U+4E00), the characters NFC would change, U+0085 and U+FEFF
"$py" - "$work/corpus.json" <<'PY' || exit 1
import json, sys
docs = json.load(open(sys.argv[1], encoding="utf-8"))
docs += ["a\u3000\u3000b", "\u3000\u3001\u3002x", "x\u2003\u4e00\u4e8c", "\u4e00\u3000\u4e8c", "\u1680\u0800 \u2028z",
         "\u1fd3\u1fbe\u2126\u212a \u03ceK", "word\u00a0\u3000.", " \u0085 \ufeffa", "ab  \n\n  \r\n ", "\u3000"]
json.dump(docs, open(sys.argv[1], "w", encoding="utf-8"), ensure_ascii=False)
PY
files=()
for v in "${vocabs[@]}"; do files+=("$dir/ggml-vocab-${v%%:*}.gguf"); done
node "$here/gguf_llamacpp_oracle.mjs" "$lib" "$work/corpus.json" "$work" "${files[@]}" ||
  { echo "FAIL: the llama.cpp oracle"; exit 1; }
fail=0
for v in "${vocabs[@]}"; do
  name=${v%%:*}
  "$tool" corpus "$dir/ggml-vocab-$name.gguf" "$work/corpus.json" "$work/ggml-vocab-$name.json" "${v#*:}" || fail=1
done
exit $fail
