#!/usr/bin/env bash
# mhc60: backward_finish in one pass (column CTAs exchange dpre; kernels/cuda/mhc_backward.cu,
# branch mhc-fused-bwd) against main. Correctness first (the single-pass vs two-pass bitwise test,
# the suite, sanitizers), then the bench, alternating.
set -uo pipefail
C=.carry/mhc60
O=${OUT:-/tmp}/mhc60
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
T=$C/cand/cakegrad_gpu_mhc_tests
timeout 120 $T --gtest_filter='MhcKernels.SinglePassAndTwoPass*' > "$O/bitwise.txt" 2>&1
echo "single vs two-pass rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$O/bitwise.txt" | tr '\n' ' ') at $(el) s"
grep -E "Failure|records|: dX|: dfn|trap|error" "$O/bitwise.txt" | head -8
timeout 300 $T > "$O/suite.txt" 2>&1
echo "suite rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$O/suite.txt" | tr '\n' ' ') at $(el) s"
grep -E "FAILED  \]" "$O/suite.txt" | head -10
grep -E "^rel-L2 T=(16384|4097|7) C=(4096|16384|7168)" "$O/suite.txt" | head -6
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*:MhcKernels.SinglePassAndTwoPass*' > "$O/memcheck.txt" 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.txt") at $(el) s"
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' > "$O/racecheck.txt" 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck.txt") at $(el) s"
timeout 150 compute-sanitizer --tool synccheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' > "$O/synccheck.txt" 2>&1
echo "synccheck rc=$? $(grep -E 'ERROR SUMMARY' "$O/synccheck.txt") at $(el) s"
for r in 1 2 3; do
  for v in base cand; do
    timeout 60 $C/$v/cakegrad_mhc_bench > "$O/bench_${v}_$r.txt" 2>&1
    grep -E "^\| backward_finish|copy" "$O/bench_${v}_$r.txt" | sed "s/^/r$r $v /" | cut -c1-100
  done
done
echo "== done at $(el) s"
