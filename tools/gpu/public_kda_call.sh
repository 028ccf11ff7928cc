#!/usr/bin/env bash
# Runs ON the GPU machine: the public Triton KDA kernels (flash-linear-attention's chunk_kda, the
# "best public Triton kernels" of issue #5) timed and checked against FP64 by
# bench/kda_public_bench.py, after our own kda_bench in the same call, so that both sides of the
# comparison come from one device and one hour. Logs go to $OUT.
# Here first (nothing can be fetched there; einops and packaging are on its image):
#   python3 -m pip download --no-deps -d .whl fla-core==0.6.0
#   ninja -C build && bash tools/gpu/package_for_gpu.sh
# Device call: {"command": "bash tools/gpu/public_kda_call.sh",
#   "carry": [".whl", ".carry/gpu.tar.xz"], "timeout_s": 600}
# PUBLIC_ARGS passes options to the Python bench (e.g. "--cases 0 --reps 10").
set -uo pipefail
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
} | tee "$OUT/env.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
if [ -f .carry/gpu.tar.xz ]; then
  tar xJf .carry/gpu.tar.xz
  timeout 150 .carry/gpu/bin/cakegrad_kda_bench > "$OUT/bench_kda.txt" 2>&1
  echo "== our kda_bench rc=$? at $(el) s"
  grep -E "bwd chunked|fwd  median|vs sequential" "$OUT/bench_kda.txt"
fi
timeout $((570 - $(el))) python3 bench/kda_public_bench.py --json "$OUT/public.json" \
  ${PUBLIC_ARGS:-} 2>&1 | tee "$OUT/public.txt"
echo "== public bench rc=${PIPESTATUS[0]} at $(el) s"
