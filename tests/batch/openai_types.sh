#!/usr/bin/env bash
# openai_types.sh - an independent reader of the Batch API output: every line
# of a flexgen run's output file (make_batch.py's mixed file with its five
# malformed lines) becomes a literal of a TypeScript file typed with OpenAI's
# own client types (openai 4.77.0: ChatCompletion, Completion), and
# `tsc --noEmit --strict` must accept it: a missing or mistyped field the
# client expects is a compile error naming it. openai and tsc come from npm
# (scripts/fetch-openai-types.sh); no registry: skipped (exit 77).
# Usage: openai_types.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
"$here/../../scripts/fetch-openai-types.sh"
case $? in 0) ;; 3) echo "SKIP: the npm registry cannot be reached"; exit 77 ;; *) exit 1 ;; esac
ts="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/openai-ts"
rm -rf "$work" && mkdir -p "$work"
"$py" "$here/../ref/make_checkpoint.py" --out "$work/m" --layers 1 --hidden 32 --heads 2 --ffn 64 --vocab 600 \
  --max-pos 256 --seed 5 --std 0.6 --synth-vocab >/dev/null || exit 1
"$py" "$here/make_batch.py" "$work/b.jsonl" 60 --bad --max-pos 256 2>/dev/null || exit 1
printf '{%% for m in messages %%}<|{{ m.role }}|>{{ m.content }}\n{%% endfor %%}<|assistant|>' >"$work/chat.jinja"
"$flexgen" run --model "$work/m" --prompts "$work/b.jsonl" --chat-template "$work/chat.jinja" --device host \
  --engine reference --out "$work/o.jsonl" 2>"$work/run.err"
[ $? -eq 3 ] || { echo "FAIL the run: $(grep error: "$work/run.err")"; exit 1; }
ln -sfn "$ts/node_modules" "$work/node_modules"
{
  cat <<'TS'
import type { ChatCompletion } from "openai/resources/chat/completions";
import type { Completion } from "openai/resources/completions";
// One line of a Batch API output file, as OpenAI documents it.
interface BatchOutputLine {
  id: string;
  custom_id: string | null;
  response: { status_code: number; request_id: string; body: ChatCompletion | Completion } | null;
  error: { code: string; message: string } | null;
}
export const lines: BatchOutputLine[] = [
TS
  sed 's/$/,/' "$work/o.jsonl"
  echo "];"
} >"$work/check.ts"
if ! (cd "$work" && node node_modules/typescript/bin/tsc --noEmit --strict --skipLibCheck --moduleResolution node \
      --module commonjs --target es2020 check.ts >"$work/tsc.log" 2>&1); then
  echo "FAIL tsc rejects the output against openai's types:"; head -20 "$work/tsc.log"; exit 1
fi
echo "ok   $(wc -l <"$work/o.jsonl") output lines accepted by tsc as openai's ChatCompletion / Completion batch lines"
