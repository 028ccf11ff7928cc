#!/usr/bin/env bash
# kda77: the segmented sequential backward, second form (seg2, working tree: segment length from
# the shape, whole documents from 32 chains on, transitions only where the scans read them,
# dinitial_state from segment 0's backward) against main 0a8f958 (base). seg2's sequential
# accuracy suite (with its new packed / odd / fast-decay shapes) twice, KdaKernels.*, memcheck on
# multi-segment problems; per-kernel times (ncu) of one backward; the few-head bench.
set -uo pipefail
C=.carry/kda77
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp}/kda77
mkdir -p "$O"
T=$C/seg2/cakegrad_gpu_kda_tests
echo "== seg2 tests"
timeout 300 $T --gtest_filter='*KdaKernelsAccuracy*:KdaKernels.*' --gtest_repeat=2 > "$O/tests_seg2.txt" 2>&1
echo "rc=$?"
grep -E "^\[ kda \].*(dA_log|ddt_bias|dinitial)" "$O/tests_seg2.txt" | awk '{print $5, $7}' | sort -k2 -g | tail -6
grep -E "FAILED|^\[  PASSED" "$O/tests_seg2.txt" | sort | uniq -c
echo "== seg2 memcheck (Sanitize, determinism, packed H1)"
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='KdaKernels.Sanitize*:KdaKernels.BitwiseDeterministic*:*KdaKernelsAccuracy*docs16_i32*:*KdaKernelsAccuracy*B2_T65_H1' > "$O/memcheck.txt" 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$O/memcheck.txt" | tail -3
echo "== ncu per-kernel times, seg2"
for spec in "0 1" "1 1" "1 2" "2 2"; do
  set -- $spec
  KDA_BENCH_CASES=$1 KDA_BENCH_H=$2 timeout 120 ncu --metrics gpu__time_duration.sum \
    -k regex:"KdaSegment|KdaRecompute|KdaBackwardKernel|KdaParamReduce" -c 5 $C/seg2/cakegrad_kda_bench > "$O/times_$1_$2.txt" 2>&1
  echo "-- case $1 H=$2"
  grep -E "Kda[A-Za-z]*Kernel|gpu__time_duration" "$O/times_$1_$2.txt" | grep -v PROF | sed 's/(cakegrad.*//' | paste - - | awk '{print $1, $(NF-1), $NF}'
done
for v in base seg2; do
  for h in 1 2 3; do
    echo "== $v H=$h"
    KDA_BENCH_CASES=012 KDA_BENCH_H=$h timeout 150 $C/$v/cakegrad_kda_bench 2>&1 | tee -a "$O/bench_$v.txt" | grep -E "bwd  median"
  done
done
