#!/usr/bin/env bash
# GGUF files as people download them (issue 33, must show 5): this engine on
# k-quant and Q8_0 files beside llama.cpp on the same files, in one sitting,
# with this machine's limits measured in the same script.
#   1. flexgen-fmt-bench: memory read bandwidth, the fp32 FMA peak (with
#      OpenBLAS sgemm and our kernel at 2048^3 beside it) and the int16
#      VPDPWSSD peak, and a Linear on each format (tinyllama's FFN shape) at
#      1, 4, 32 and 256 rows: GB/s of weight read and FLOP/s beside those
#      limits; for Q4_K, Q5_K, Q6_K the int16 kernels and the fp32 ones they
#      replaced, interleaved in the same run.
#   2. bench_llamacpp.sh case a on tinyllama-1.1b shapes, MIX=q4_k_m (0.67 GB)
#      and MIX=Q8_0 (1.17 GB): in memory, 1 and 32 prompts, ours under
#      --policy auto; its table has the decode GB/s (the file's bytes per
#      decode step over the step's time) to set beside 1.'s bandwidth.
#   3. case c: llama-2-70b shapes in Q4_K_M, LAYERS_C (default 48) of its 80
#      layers: 25 GB, larger than this machine's 24 GiB, and with our tier
#      store beside it (another 25 GB) within its disk (the full 80 layers,
#      41 GB, twice, would not fit: say so where you report it). Ours
#      --policy auto under --gpu-mem/--cpu-mem (bench_llamacpp.sh), llama.cpp
#      mmaps the file, with its --no-repack (NOREPACK=1 of bench_llamacpp.sh:
#      its default copies the weights into anonymous memory, which a model
#      larger than memory cannot hold).
# Usage: [REPS=3] [REPS_C=REPS] [CASES="a c"] [LAYERS_C=48] bench/bench_quant.sh   (build first)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${REPS:-3}
echo "bench_quant: $(date -u +%FT%TZ), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
"$root/scripts/fetch-gguf-py.sh" >/dev/null || { echo "bench_quant: gguf-py cannot be fetched"; exit 1; }
echo "== 1. kernels beside the machine's limits"
"$root/build/bin/flexgen-fmt-bench" --out 5632 --in 2048 --rows 1,4,32,256 --formats F16,Q8_0,Q4_K,Q5_K,Q6_K || exit 1
for c in ${CASES:-a c}; do
  case $c in
  a) for mix in q4_k_m Q8_0; do
       echo "== 2. tinyllama-1.1b shapes, $mix, in memory"
       REPS=$reps MIX=$mix "$root/bench/bench_llamacpp.sh" a
     done ;;
  c) echo "== 3. llama-2-70b shapes, Q4_K_M, ${LAYERS_C:-48} layers, larger than memory"
     REPS=${REPS_C:-$reps} NOREPACK=1 MIX=q4_k_m LAYERS=${LAYERS_C:-48} PROMPT_COUNTS="${COUNTS_C:-1 32}" "$root/bench/bench_llamacpp.sh" c ;;
  esac
done
