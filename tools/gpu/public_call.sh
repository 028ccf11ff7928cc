#!/usr/bin/env bash
# Runs ON the GPU machine: the public Triton kernels our issues compare with (flash-linear-
# attention's chunk_kda and causal_conv1d), timed and checked against FP64 by
# bench/<family>_public_bench.py, after our own bench of the same family in the same call, so that
# both sides of each comparison come from one device and one hour. Logs go to $OUT.
# Here first (nothing can be fetched there; einops and packaging are on its image):
#   python3 -m pip download --no-deps -d .whl fla-core==0.6.0
#   ninja -C build && bash tools/gpu/package_for_gpu.sh
# Device call: {"command": "bash tools/gpu/public_call.sh",
#   "carry": [".whl", ".carry/gpu.tar.xz"], "timeout_s": 600}
# FAMILIES (default "kda conv1d") picks the families, PUBLIC (default FAMILIES) those whose public
# kernels run; OURS=0 skips our benches (or carry no .carry/gpu.tar.xz); KDA_ARGS / CONV1D_ARGS
# pass options to the Python benches (e.g. KDA_ARGS="--cases 2"). Each KDA case spends ~3-4
# minutes in Triton's compilation and autotuning, so all three KDA cases do not fit one call
# beside anything else.
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
} | tee "$OUT/env.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
families=${FAMILIES:-kda conv1d}
if [ "${OURS:-1}" = 1 ] && [ -f .carry/gpu.tar.xz ]; then
  tar xJf .carry/gpu.tar.xz
  for f in $families; do
    timeout 200 ".carry/gpu/bin/cakegrad_${f}_bench" > "$OUT/bench_$f.txt" 2>&1
    echo "== our $f bench rc=$? at $(el) s"
    grep -E "bwd chunked  median|fwd  median|queued|vs sequential|^\| (forward|backward)" \
      "$OUT/bench_$f.txt"
  done
fi
for f in ${PUBLIC-$families}; do
  case $f in kda) extra=${KDA_ARGS:-} ;; conv1d) extra=${CONV1D_ARGS:-} ;; *) extra= ;; esac
  timeout $((580 - $(el))) python3 "bench/${f}_public_bench.py" --json "$OUT/${f}_public.json" \
    $extra 2>&1 | tee "$OUT/${f}_public.txt"
  echo "== public $f bench rc=${PIPESTATUS[0]} at $(el) s"
done
