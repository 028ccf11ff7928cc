#!/usr/bin/env bash
# kda84: the sequential backward kernel with w, do and beta loaded while the token vectors' copies
# are in flight (v2b) against v2 (kda83's, seq-token-vectors-v2 before that commit).
set -uo pipefail
C=.carry/kda84
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp}/kda84
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
for v in v2 v2b; do
  timeout 120 $C/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.SequentialBackwardHashes*' \
    > "$O/hashes_$v.txt" 2>&1
  echo "$v rc=$? $(grep -E '^\[ kda seq bwd hashes' "$O/hashes_$v.txt" | md5sum)"
done
timeout 200 $C/v2b/cakegrad_gpu_kda_tests --gtest_filter='*KdaKernelsAccuracy*:KdaKernels.Sanitize*:KdaKernels.Bitwise*' > "$O/tests_v2b.txt" 2>&1
echo "v2b sequential suite rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$O/tests_v2b.txt" | tr '\n' ' ')"
for round in 1 2 3; do
  for v in v2 v2b; do
    KDA_BENCH_CASES=01 KDA_BENCH_H=1 timeout 150 $C/$v/cakegrad_kda_bench 2>&1 | grep -E "bwd  median" | sed "s/^/r$round $v H=1 /" | cut -c1-80
  done
done
for v in v2 v2b; do
  KDA_BENCH_CASES=0 KDA_BENCH_H=1 timeout 60 ncu --metrics gpu__time_duration.sum -k regex:"KdaBackwardKernel" -c 2 \
    $C/$v/cakegrad_kda_bench 2>&1 | grep -E "gpu__time_duration" | sed "s/^/$v backward kernel /"
done
echo "== done at $(el) s"
