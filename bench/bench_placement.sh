#!/usr/bin/env bash
# Placement invariance on the OPT-125M shape (issue 6, must-show 1's full
# matrix): tests/engine/placement.sh with a random OPT-125M-shaped checkpoint
# (12 layers, hidden 768, 12 heads, vocab 50272; std 0.02) instead of the
# tiny CI model. Every policy's tokens and logits must equal the reference
# engine's bit for bit. Usage: bench/bench_placement.sh   (build first)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /var/tmp/flexgen-placement.XXXXXX)
trap 'rm -rf "$work"' EXIT
time "$root/tests/engine/placement.sh" "$root/build/bin/flexgen" "$work/run" \
  "--layers 12 --hidden 768 --heads 12 --ffn 3072 --vocab 50272 --max-pos 2048 --seed 21 --std 0.02"
