# Sourced by the engine test scripts that run one small checkpoint: with
# $work set, makes an empty $work, a 2-layer checkpoint in $work/m (seed 9)
# and two prompts in $work/p.json, and sets $ref (tests/ref) and $py.
ref=$(cd "$(dirname "${BASH_SOURCE[0]}")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
"$py" "$ref/make_checkpoint.py" --out "$work/m" --layers 2 --hidden 64 --heads 4 --ffn 128 --vocab 300 \
  --max-pos 64 --seed 9 >/dev/null || exit 1
echo '[[2, 10, 20, 30], [2, 7]]' >"$work/p.json"
