#!/usr/bin/env bash
# kda81: the scan kernel with two row groups a CTA (8 warps) and no 64-bit division a tile (seg5,
# working tree) against main 1294ab9 (seg4); base (0a8f958) at the bench's own head counts, where
# the sequential backward is not the default (does segmenting H = 16 cost anything?).
set -uo pipefail
C=.carry/kda81
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp}/kda81
mkdir -p "$O"
T=$C/seg5/cakegrad_gpu_kda_tests
echo "== seg5 tests"
timeout 300 $T --gtest_filter='*KdaKernelsAccuracy*:KdaKernels.*' > "$O/tests_seg5.txt" 2>&1
echo "rc=$?"
grep -E "^\[ kda \].*(dA_log|ddt_bias|dinitial)" "$O/tests_seg5.txt" | awk '{print $5, $7}' | sort -k2 -g | tail -3
grep -E "FAILED|^\[  PASSED" "$O/tests_seg5.txt" | sort | uniq -c
echo "== seg5 racecheck + memcheck (fast decay: 2 documents of 4 segments)"
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='*KdaKernelsAccuracy*fastdecay*' > "$O/racecheck.txt" 2>&1
echo "rc=$?"; grep -E "RACECHECK SUMMARY" "$O/racecheck.txt"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*KdaKernelsAccuracy*fastdecay*:KdaKernels.BitwiseDet*' > "$O/memcheck.txt" 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY" "$O/memcheck.txt"
echo "== ncu scan times (seg4, seg5)"
for v in seg4 seg5; do
  for spec in "0 1" "1 1"; do
    set -- $spec
    KDA_BENCH_CASES=$1 KDA_BENCH_H=$2 timeout 120 ncu --metrics gpu__time_duration.sum -k regex:"KdaSegmentScan" -c 1 \
      $C/$v/cakegrad_kda_bench 2>&1 | grep -E "gpu__time_duration" | sed "s/^/$v case $1 H=$2 /"
  done
done
for round in 1 2; do
  for v in seg4 seg5; do
    for h in 1 2; do
      echo "== round $round $v H=$h"
      KDA_BENCH_CASES=01 KDA_BENCH_H=$h timeout 150 $C/$v/cakegrad_kda_bench 2>&1 | tee -a "$O/bench_$v.txt" | grep -E "bwd  median"
    done
  done
done
for v in base seg5; do
  echo "== $v at the bench's head counts (sequential = bwd; default chunked)"
  KDA_BENCH_CASES=012 timeout 200 $C/$v/cakegrad_kda_bench 2>&1 | tee -a "$O/bench_$v.txt" | grep -E "bwd  median"
done
