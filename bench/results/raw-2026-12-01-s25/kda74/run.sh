#!/usr/bin/env bash
# kda74: the FP64 recompute pass with four partial row sums and no qh (v1) against main (base).
# Sequential backward at (1, 8192, 1) and (1, 32768, 2), 3 alternating rounds; ncu of the
# recompute kernel; v1's accuracy tests on the sequential shapes (the whole KdaKernelsAccuracy
# suite and the pinned draw).
set -uo pipefail
C=.carry/kda74
for round in 1 2 3; do
  for v in base v1; do
    for spec in "0 1" "1 2"; do
      set -- $spec
      echo "== round $round $v case $1 H=$2: $(KDA_BENCH_CASES=$1 KDA_BENCH_H=$2 timeout 120 \
        $C/$v/cakegrad_kda_bench 2>&1 | grep 'bwd  median' | awk '{print $6, $7}')"
    done
  done
done
for v in base v1; do
  KDA_BENCH_CASES=0 KDA_BENCH_H=1 timeout 60 ncu --metrics gpu__time_duration.sum \
    -k regex:KdaRecompute --launch-skip 2 -c 1 $C/$v/cakegrad_kda_bench > $OUT/ncu_$v.txt 2>&1
  echo "ncu $v recompute: $(grep gpu__time_duration $OUT/ncu_$v.txt | tail -1)"
done
timeout 200 $C/v1/cakegrad_gpu_kda_tests --gtest_filter='Shapes/KdaKernelsAccuracy.*:KdaKernelsAccuracyPinned.*:KdaKernels.BitwiseDeterministic*' \
  > $OUT/v1_tests.txt 2>&1; echo "v1 tests rc=$? $(tail -1 $OUT/v1_tests.txt)"
grep -E "\[ kda( pinned)? \] .* (dA_log|ddt_bias|dinitial_state) " $OUT/v1_tests.txt | awk '{print $(NF-2)}' | sort -g | tail -1
