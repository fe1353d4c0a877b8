#!/usr/bin/env bash
# Every broken checkpoint or input must be refused with exit status 2 and a
# message that names the file and the tensor or field at fault: never a crash,
# a hang, or output. Usage: bad_input.sh FLEXGEN WORKDIR
set -uo pipefail
flexgen=$1 work=$2
ref=$(cd "$(dirname "$0")/../ref" && pwd)
py=${FG_PYTHON:-/usr/bin/python3}
rm -rf "$work" && mkdir -p "$work"
"$py" "$ref/make_checkpoint.py" --out "$work/good" --layers 2 --hidden 64 --heads 4 --ffn 256 --vocab 1000 \
  --max-pos 128 --seed 5 >/dev/null || exit 1
"$py" "$ref/corrupt.py" --src "$work/good" --out "$work/bad" >"$work/list" || exit 1
echo '[[2, 10, 20]]' >"$work/p.json"
fails=0 n=0

# expect NAME FILE-IN-MESSAGE WHAT-ELSE-IN-MESSAGE -- flexgen args...
expect() {
  local name=$1 file=$2 what=$3
  shift 4
  n=$((n + 1))
  timeout 60 "$flexgen" run --engine reference "$@" --out "$work/out.jsonl" --gen-len 2 >/dev/null 2>"$work/err"
  local rc=$?
  local msg
  msg=$(grep 'error:' "$work/err" | head -1)
  if [ $rc -ne 2 ]; then
    echo "FAIL $name: exit $rc, expected 2: $(head -3 "$work/err")"; fails=$((fails + 1))
  elif [[ "$msg" != *"$file"* || "$msg" != *"$what"* ]]; then
    echo "FAIL $name: message does not name '$file' and '$what': $msg"; fails=$((fails + 1))
  elif [ -e "$work/out.jsonl" ] || [ -e "$work/out.jsonl.partial" ]; then
    echo "FAIL $name: an output file was left behind"; fails=$((fails + 1))
  else
    echo "ok   $name: $msg"
  fi
}

st=model.safetensors
while IFS=$'\t' read -r dir what; do
  v=$(basename "$dir")
  case $v in
    truncated|truncated_in_header|empty_file|header_len_past_eof|header_len_huge|header_not_json)
      expect "$v" "$st" "" -- --model "$dir" --prompt-ids "$work/p.json" ;;
    overlapping_offsets|offsets_out_of_range|offsets_reversed|dtype_i32|dtype_unknown|shape_bytes_mismatch|shape_vs_config|missing_tensor)
      tensor=$(echo "$what" | grep -o 'decoder\.[A-Za-z0-9_.]*' | head -1)
      file=$st
      [ "$v" = missing_tensor ] && file=$v   # the message names the directory's file and the absent tensor
      expect "$v" "$file" "$tensor" -- --model "$dir" --prompt-ids "$work/p.json" ;;
    config_not_json) expect "$v" config.json "JSON" -- --model "$dir" --prompt-ids "$work/p.json" ;;
    config_wrong_type) expect "$v" config.json hidden_size -- --model "$dir" --prompt-ids "$work/p.json" ;;
    config_missing_field) expect "$v" config.json num_hidden_layers -- --model "$dir" --prompt-ids "$work/p.json" ;;
    config_heads_not_divisor) expect "$v" config.json num_attention_heads -- --model "$dir" --prompt-ids "$work/p.json" ;;
    config_vocab_huge) expect "$v" config.json vocab_size -- --model "$dir" --prompt-ids "$work/p.json" ;;
    config_layers_huge) expect "$v" config.json num_hidden_layers -- --model "$dir" --prompt-ids "$work/p.json" ;;
    config_more_layers) expect "$v" "$v" "decoder.layers.2" -- --model "$dir" --prompt-ids "$work/p.json" ;;
    *) echo "FAIL $v: no expectation written for this variant ($what)"; fails=$((fails + 1)) ;;
  esac
done <"$work/list"

# inputs other than the checkpoint
good=$work/good
echo '[[2, 10, 1000]]' >"$work/oor.json"
expect id_out_of_range oor.json "id 1000" -- --model "$good" --prompt-ids "$work/oor.json"
echo '[[2, -1]]' >"$work/neg.json"
expect id_negative neg.json "id -1" -- --model "$good" --prompt-ids "$work/neg.json"
echo '[[2, 10], [' >"$work/broken.json"
expect ids_not_json broken.json "JSON" -- --model "$good" --prompt-ids "$work/broken.json"
echo '[[2, "x"]]' >"$work/str.json"
expect id_not_integer str.json "token 1" -- --model "$good" --prompt-ids "$work/str.json"
echo '[[]]' >"$work/empty.json"
expect prompt_empty empty.json "prompt 0" -- --model "$good" --prompt-ids "$work/empty.json"
"$py" -c 'import json; print(json.dumps([[2] * 127]))' >"$work/long.json"
expect prompt_too_long long.json "positions" -- --model "$good" --prompt-ids "$work/long.json"
expect missing_model nowhere "not a model directory" -- --model "$work/nowhere" --prompt-ids "$work/p.json"
expect unknown_dummy opt-7b "unknown model name" -- --dummy opt-7b --prompt-ids "$work/p.json"
for bad in opt-125m:0 opt-125m:13 opt-125m:x opt-125m: opt-125m:2x; do
  expect "dummy_layers_$bad" "$bad" "LAYERS after ':' (opt-125m has 12): expected an integer in [1, 12]" -- --dummy "$bad" --prompt-ids "$work/p.json"
done
expect bad_flag gen-len "integer" -- --model "$good" --prompt-ids "$work/p.json" --gen-len x

echo "bad_input: $((n - fails)) passed, $fails failed"
[ $fails -eq 0 ] && rm -rf "$work"
[ $fails -eq 0 ]
