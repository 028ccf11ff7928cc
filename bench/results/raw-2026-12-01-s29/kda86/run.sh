#!/usr/bin/env bash
# kda86: the chunked backward's grad kernel persistent, each item's token rows staged by cp.async
# during the previous item's epilogue (pers, 8385da9), and the same with the next item's L2
# prefetch moved there too (perspf, 4aaabef), against main 0c6beda (base). Hash gate (bitwise
# equal expected), 3 alternating bench rounds (chunked only), pers's suite and sanitizers, ncu
# times of the grad kernel per variant.
# Device call: {"command": "tar xJf .carry/kda86x/kda86.tar.xz -C .carry && bash .carry/kda86/run.sh",
#   "carry": [".carry/kda86x"], "timeout_s": 600}
set -uo pipefail
C=.carry/kda86
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
HASH_FILTER='KdaKernels.ChunkedBackwardHashesForCrossBuildComparison' BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" \
  TEST_TIMEOUT=240 bash tools/gpu/ab_bench.sh $C kda "base pers perspf" 3 "pers"
echo "== ncu at $(el) s"
for v in base pers perspf; do
  [ "$(el)" -lt 520 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:KdaChunkGradKernel -c 2 $C/$v/cakegrad_kda_bench > /tmp/ncu_$v.txt 2>&1
  grep -E "gpu__time_duration" /tmp/ncu_$v.txt | sed "s/^/$v case0 /"
done
echo "== done at $(el) s"
