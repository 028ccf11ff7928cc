#!/usr/bin/env bash
# kda78: the segmented sequential backward, third form (seg3, working tree): the transitions as
# warp-specialized row passes (kda_row_pass.cu, which also holds the recompute pass) and the scans
# with the map streamed through shared memory (cp.async, double-buffered tiles), against main
# 0a8f958 (base). Same checks as kda77 (seg2's numbers are there).
set -uo pipefail
C=.carry/kda78
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp}/kda78
mkdir -p "$O"
T=$C/seg3/cakegrad_gpu_kda_tests
echo "== seg3 tests"
timeout 300 $T --gtest_filter='*KdaKernelsAccuracy*:KdaKernels.*' --gtest_repeat=2 > "$O/tests_seg3.txt" 2>&1
echo "rc=$?"
grep -E "^\[ kda \].*(dA_log|ddt_bias|dinitial)" "$O/tests_seg3.txt" | awk '{print $5, $7}' | sort -k2 -g | tail -6
grep -E "FAILED|^\[  PASSED" "$O/tests_seg3.txt" | sort | uniq -c
echo "== seg3 memcheck (Sanitize, determinism, packed H1)"
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='KdaKernels.Sanitize*:KdaKernels.BitwiseDeterministic*:*KdaKernelsAccuracy*docs16_i32*:*KdaKernelsAccuracy*B2_T65_H1' > "$O/memcheck.txt" 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$O/memcheck.txt" | tail -3
echo "== ncu per-kernel times, seg3"
for spec in "0 1" "1 1" "1 2" "2 2"; do
  set -- $spec
  KDA_BENCH_CASES=$1 KDA_BENCH_H=$2 timeout 120 ncu --metrics gpu__time_duration.sum \
    -k regex:"KdaSegment|KdaRowPass|KdaRecompute|KdaBackwardKernel|KdaParamReduce" -c 6 $C/seg3/cakegrad_kda_bench > "$O/times_$1_$2.txt" 2>&1
  echo "-- case $1 H=$2"
  grep -E "Kda[A-Za-z]*Kernel|gpu__time_duration" "$O/times_$1_$2.txt" | grep -v PROF | sed 's/(cakegrad.*//' | paste - - | awk '{print $1, $2, $(NF-1), $NF}'
done
for v in base seg3; do
  for h in 1 2 3; do
    echo "== $v H=$h"
    KDA_BENCH_CASES=012 KDA_BENCH_H=$h timeout 150 $C/$v/cakegrad_kda_bench 2>&1 | tee -a "$O/bench_$v.txt" | grep -E "bwd  median"
  done
done
