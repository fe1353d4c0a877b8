#!/usr/bin/env bash
# run_chat.sh - the chat template renderer (tests/chat/test_chat) against
# @huggingface/jinja (jinja_oracle.js, node), both fetched pinned from npm
# by scripts/fetch-jinja-oracle.sh into the FlexGen cache:
#   run_chat.sh oracle   the Llama 3 and Qwen3 chat templates over 40
#                        seeded conversations each, add_generation_prompt
#                        on and off (160 renders), and one unit template per
#                        construct: every output byte-identical
# Exit 77 (ctest: skipped) when the oracle cannot be fetched because the npm
# registry is unreachable. Environment: FG_SRC, FG_PYTHON, FG_TEST_CHAT.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${FG_SRC:-$(cd "$here/../.." && pwd)}
py=${FG_PYTHON:-/usr/bin/python3}
tool=${FG_TEST_CHAT:?FG_TEST_CHAT: path of test_chat}

. "$src/tests/fetch_or_skip.sh"
fetch_or_skip fetch-jinja-oracle.sh "@huggingface/jinja"
cache="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/jinja"
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/deps.sh installs it)"; exit 1; }

case "${1:-}" in
oracle)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  set -e
  "$py" "$here/chat_cases.py" conversations "$work/conv.json" "$cache" --n 40 --seed 7
  "$py" "$here/chat_cases.py" units "$work/units.json"
  status=0
  for c in conv units; do
    "$tool" batch "$work/$c.json" "$work/$c.c.json"
    node "$here/jinja_oracle.js" "$cache/jinja/index.cjs" "$work/$c.json" "$work/$c.js.json"
    label=$([ $c = conv ] && echo "Llama 3 and Qwen3 conversations" || echo "unit templates")
    "$py" "$here/chat_cases.py" compare "$work/$c.json" "$work/$c.c.json" "$work/$c.js.json" "$label" || status=1
  done
  exit $status ;;
*)
  echo "usage: run_chat.sh oracle" >&2
  exit 2 ;;
esac
