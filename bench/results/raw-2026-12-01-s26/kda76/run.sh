#!/usr/bin/env bash
# kda76: the sequential backward cut into 256-token segments that run in parallel (seg: the
# working tree) against main 0a8f958 (base: one cluster walks a whole document). seg's KDA
# accuracy, determinism and sanitizer tests of the sequential path, then the few-head bench
# (cases 0, 1, 2 at H = 1, 2; auto = sequential there), alternating base / seg.
set -uo pipefail
C=.carry/kda76
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp}/kda76
mkdir -p "$O"
T=$C/seg/cakegrad_gpu_kda_tests
echo "== seg tests"
timeout 240 $T --gtest_filter='KdaKernelsAccuracy*:KdaKernels.*' --gtest_repeat=2 > "$O/tests_seg.txt" 2>&1
echo "rc=$?"
grep -E "FAILED|dA_log|dinitial" "$O/tests_seg.txt" | sort | uniq -c | sort -rn | head -60
grep -E "^\[  (PASSED|FAILED) " "$O/tests_seg.txt"
echo "== seg memcheck (Sanitize, determinism)"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='KdaKernels.Sanitize*:KdaKernels.BitwiseDeterministic*' > "$O/memcheck.txt" 2>&1
echo "rc=$?"; tail -3 "$O/memcheck.txt"
echo "== seg racecheck (Sanitize)"
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='KdaKernels.Sanitize*' > "$O/racecheck.txt" 2>&1
echo "rc=$?"; tail -3 "$O/racecheck.txt"
for round in 1 2; do
  for v in base seg; do
    for h in 1 2; do
      echo "== round $round $v H=$h"
      KDA_BENCH_CASES=012 KDA_BENCH_H=$h timeout 150 $C/$v/cakegrad_kda_bench 2>&1 | tee -a "$O/bench_$v.txt" | grep -E "bwd  median|vs sequential"
    done
  done
done
