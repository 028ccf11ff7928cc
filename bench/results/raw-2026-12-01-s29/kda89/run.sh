#!/usr/bin/env bash
# kda89: three more bitwise-neutral instruction cuts in the grad kernel, cumulative, against main
# a39cb0d (base): a (41cabcd) [dKb | dVb] splits each input block once; c (15b5719) + the
# epilogue's 32 warp sums as one reduce-scatter; b (12eec1d) + per-token addresses as base and
# stride. Hash gate (bitwise equal expected), 3 alternating bench rounds (chunked only), b's suite
# and sanitizers, ncu times of the grad kernel per variant.
# Device call: {"command": "tar xJf .carry/kda89x/kda89.tar.xz -C .carry && bash .carry/kda89/run.sh",
#   "carry": [".carry/kda89x"], "timeout_s": 600}
set -uo pipefail
C=.carry/kda89
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" \
  TEST_TIMEOUT=240 bash tools/gpu/ab_bench.sh $C kda "base a c b" 3 "b"
echo "== ncu at $(el) s"
for v in base a c b; do
  [ "$(el)" -lt 520 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:KdaChunkGradKernel -c 2 $C/$v/cakegrad_kda_bench > /tmp/ncu_$v.txt 2>&1
  grep -E "gpu__time_duration" /tmp/ncu_$v.txt | sed "s/^/$v case0 /"
done
echo "== done at $(el) s"
