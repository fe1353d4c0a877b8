#!/usr/bin/env bash
# A CUDA build on a machine without a GPU (CI): the cuda module loads and
# resolves against the gpu worker (its open() is what refuses), the
# coordinator refuses --device cuda up front with exit 2 and says why, the
# default device is host, no program but the module links CUDA libraries,
# and the coordinator links no backend (it sizes devices with fg_devsize). Skipped (77) where a GPU is present: the cuda_* tests run there.
# Usage: no_gpu.sh BIN_DIR PROBE
set -uo pipefail
bin=$1 probe=$2
if "$probe" --probe >/dev/null; then echo "a GPU is present: skipped"; exit 77; fi
fails=0
check() { # name, want_rc, want_text, command...
  local name=$1 want=$2 text=$3; shift 3
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq "$want" ] && grep -q -- "$text" <<<"$out"; then echo "ok   $name"
  else echo "FAIL $name: exit $rc (want $want), output: $(tail -2 <<<"$out")"; fails=$((fails + 1)); fi
}
check "gpu worker loads the cuda module, which finds no device" 1 "no CUDA device can be opened" \
  "$bin/flexgen-gpu-worker" --profile --device cuda --quick --model opt-125m
check "flexgen run --device cuda refused up front" 2 "no CUDA device can be opened" \
  "$bin/flexgen" run --dummy opt-125m --prompt-ids /dev/null --out /dev/null --device cuda
# (refused by its budget before it makes a shm segment, which would race
# runtime.gpu_worker_profile's check that none is left behind)
check "the default device is host" 2 "on the host backend" \
  env -u FLEXGEN_DEVICE "$bin/flexgen-gpu-worker" --profile --quick --model opt-125m --gpu-mem 1M
# (ldd's output taken whole: grep -q would close the pipe under pipefail)
for p in flexgen flexgen-gpu-worker flexgen-cpu-worker flexgen-disk-worker; do
  libs=$(ldd "$bin/$p")
  if grep -qE 'libcuda|libcublas' <<<"$libs"; then echo "FAIL $p links a CUDA library"; fails=$((fails + 1)); fi
done
syms=$(nm "$bin/flexgen")
if grep -qE ' fg_backend_|host_device_init' <<<"$syms"; then echo "FAIL the coordinator links a gpu worker backend"; fails=$((fails + 1))
else echo "ok   the coordinator links no backend"; fi
libs=$(ldd "$bin/libflexgen-cuda.so")
if grep -q libcublas <<<"$libs"; then echo "ok   only the module links cuBLAS"
else echo "FAIL the module does not link cuBLAS"; fails=$((fails + 1)); fi
[ $fails -eq 0 ]
