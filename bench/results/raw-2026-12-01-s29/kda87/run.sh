#!/usr/bin/env bash
# kda87: operands split once per CTA instead of by each of the grad kernel's 16 warps: dU's hi / lo
# for the S0 walk (du, 379b06c) and, on top, Tinv^T's three parts for [dKb | dVb] (tv, a39cb0d),
# against main 0c6beda (base). Hash gate (bitwise equal expected), 3 alternating bench rounds
# (chunked only), tv's suite and sanitizers, ncu times of the grad kernel per variant.
# Device call: {"command": "tar xJf .carry/kda87x/kda87.tar.xz -C .carry && bash .carry/kda87/run.sh",
#   "carry": [".carry/kda87x"], "timeout_s": 600}
set -uo pipefail
C=.carry/kda87
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" \
  TEST_TIMEOUT=240 bash tools/gpu/ab_bench.sh $C kda "base du tv" 3 "tv"
echo "== ncu at $(el) s"
for v in base du tv; do
  [ "$(el)" -lt 520 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:KdaChunkGradKernel -c 2 $C/$v/cakegrad_kda_bench > /tmp/ncu_$v.txt 2>&1
  grep -E "gpu__time_duration" /tmp/ncu_$v.txt | sed "s/^/$v case0 /"
done
echo "== done at $(el) s"
