#!/usr/bin/env bash
# kda85: the row passes without prep warps on the 1 KB token pass (lite: decays and scalars
# stored; raw keys copied, kh made per batch) against v1 (9e39df9: prep warps load the decays)
# and v2 (e32c245: kh, d, qh stored, 3 KB a token and head).
set -uo pipefail
C=.carry/kda85
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp}/kda85
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
for v in v1 lite; do
  timeout 120 $C/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.SequentialBackwardHashes*' \
    > "$O/hashes_$v.txt" 2>&1
  echo "$v rc=$? $(grep -E '^\[ kda seq bwd hashes' "$O/hashes_$v.txt" | md5sum)"
done
timeout 200 $C/lite/cakegrad_gpu_kda_tests --gtest_filter='*KdaKernelsAccuracy*:KdaKernels.Sanitize*:KdaKernels.Bitwise*' > "$O/tests_lite.txt" 2>&1
echo "lite sequential suite rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$O/tests_lite.txt" | tr '\n' ' ') at $(el) s"
grep -E "^\[ kda \].*(dA_log|ddt_bias|dinitial)" "$O/tests_lite.txt" | awk '{print $5, $7}' | sort -k2 -g | tail -2
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $C/lite/cakegrad_gpu_kda_tests --gtest_filter='*KdaKernelsAccuracy*B2_T1000_H1_fastdecay*' > "$O/racecheck.txt" 2>&1
echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck.txt") at $(el) s"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $C/lite/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.SanitizePackedAndMalformedCuSeqlens:*KdaKernelsAccuracy*B2_T1000_H1_fastdecay*' > "$O/memcheck.txt" 2>&1
echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.txt") at $(el) s"
for round in 1 2; do
  for v in v1 v2 lite; do
    KDA_BENCH_CASES=01 KDA_BENCH_H=1 timeout 150 $C/$v/cakegrad_kda_bench 2>&1 | grep -E "bwd  median" | sed "s/^/r$round $v H=1 /" | cut -c1-80
    KDA_BENCH_CASES=0 KDA_BENCH_H=2 timeout 150 $C/$v/cakegrad_kda_bench 2>&1 | grep -E "bwd  median" | sed "s/^/r$round $v H=2 /" | cut -c1-80
  done
done
echo "== done at $(el) s"
