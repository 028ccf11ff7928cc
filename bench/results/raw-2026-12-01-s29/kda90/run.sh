#!/usr/bin/env bash
# kda90: kda89's reduce-scatter alone (rs, b5d7f0d: 15b5719 on a39cb0d) against main a39cb0d
# (base) and kda89's c (15b5719: + the [dKb | dVb] block splits), 4 alternating rounds; rs's
# suite and sanitizers; ncu times of the grad kernel.
# Device call: {"command": "tar xJf .carry/kda90x/kda90.tar.xz -C .carry && bash .carry/kda90/run.sh",
#   "carry": [".carry/kda90x"], "timeout_s": 600}
set -uo pipefail
C=.carry/kda90
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" \
  TEST_TIMEOUT=240 bash tools/gpu/ab_bench.sh $C kda "base rs c" 4 "rs"
echo "== ncu at $(el) s"
for v in base rs c; do
  [ "$(el)" -lt 520 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:KdaChunkGradKernel -c 2 $C/$v/cakegrad_kda_bench > /tmp/ncu_$v.txt 2>&1
  grep -E "gpu__time_duration" /tmp/ncu_$v.txt | sed "s/^/$v case0 /"
done
echo "== done at $(el) s"
