#!/usr/bin/env bash
# kda83: the sequential backward's token pass, v1 (9e39df9: decays and scalars; prep warps load
# them) and v2 (seq-token-vectors-v2: kh, d, qh too; row passes of 4 walking warps copying them
# with cp.async, 4 CTAs an SM), against main 05e1e8f (base); and the chunked grad kernel's
# sigmoid' fix alone (gate, 8ef3736) and with dbeta's (gatedb, 6d106fc), chunked-only rounds.
set -uo pipefail
C=.carry/kda83
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp}/kda83
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== hashes (sequential: base, v1, v2 expected equal; chunked of gate and gatedb)"
for v in base v1 v2 gate gatedb; do
  timeout 120 $C/$v/cakegrad_gpu_kda_tests \
    --gtest_filter='KdaKernels.SequentialBackwardHashes*:KdaKernels.ChunkedBackwardHashes*' \
    > "$O/hashes_$v.txt" 2>&1
  echo "$v rc=$?"
  grep -E "^\[ kda (seq )?bwd hashes" "$O/hashes_$v.txt" | sed 's/workspace [0-9a-f]* //' | \
    md5sum | sed "s/^/$v all-lines md5 /"
  grep -E "^\[ kda seq bwd hashes" "$O/hashes_$v.txt" | md5sum | sed "s/^/$v seq-lines md5 /"
done
echo "== v2 suite at $(el) s"
timeout 300 $C/v2/cakegrad_gpu_kda_tests > "$O/tests_v2.txt" 2>&1
echo "rc=$?"
grep -E "^\[ kda \].*(dA_log|ddt_bias|dinitial)" "$O/tests_v2.txt" | awk '{print $5, $7}' | sort -k2 -g | tail -3
grep -E "^\[  PASSED|^\[  FAILED" "$O/tests_v2.txt" | sort | uniq -c
echo "== v2 memcheck + racecheck (packed, malformed; fast decay: multi-segment) at $(el) s"
F='KdaKernels.SanitizePackedAndMalformedCuSeqlens:*KdaKernelsAccuracy*fastdecay*'
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $C/v2/cakegrad_gpu_kda_tests --gtest_filter="$F" > "$O/racecheck.txt" 2>&1
echo "rc=$?"; grep -E "RACECHECK SUMMARY" "$O/racecheck.txt"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $C/v2/cakegrad_gpu_kda_tests --gtest_filter="$F" > "$O/memcheck.txt" 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY" "$O/memcheck.txt"
echo "== sequential bench at $(el) s"
for round in 1 2; do
  for v in base v1 v2; do
    KDA_BENCH_CASES=01 KDA_BENCH_H=1 timeout 150 $C/$v/cakegrad_kda_bench > "$O/bench_seq_${v}_h1_r$round.txt" 2>&1
    grep -E "bwd  median" "$O/bench_seq_${v}_h1_r$round.txt" | sed "s/^/r$round $v H=1 /" | cut -c1-80
    KDA_BENCH_CASES=0 KDA_BENCH_H=2 timeout 150 $C/$v/cakegrad_kda_bench > "$O/bench_seq_${v}_h2_r$round.txt" 2>&1
    grep -E "bwd  median" "$O/bench_seq_${v}_h2_r$round.txt" | sed "s/^/r$round $v H=2 /" | cut -c1-80
  done
done
echo "== chunked-only bench at $(el) s"
for round in 1 2 3; do
  for v in base gate gatedb; do
    KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=012 timeout 150 $C/$v/cakegrad_kda_bench > "$O/bench_chunked_${v}_r$round.txt" 2>&1
    grep -E "bwd chunked  median" "$O/bench_chunked_${v}_r$round.txt" | sed "s/^/r$round $v /" | cut -c1-80
  done
done
echo "== ncu, sequential kernels at (1, 8192, 1), at $(el) s"
for v in v1 v2; do
  [ "$(el)" -lt 500 ] || break
  KDA_BENCH_CASES=0 KDA_BENCH_H=1 timeout 60 ncu --metrics gpu__time_duration.sum \
    -k regex:"KdaTokenPass|KdaRowPass|KdaSegmentScan|KdaBackwardKernel" -c 6 \
    $C/$v/cakegrad_kda_bench > "$O/ncu_$v.txt" 2>&1
  grep -E "^  [a-z].*Kda[A-Za-z]*Kernel|gpu__time_duration" "$O/ncu_$v.txt" | paste - - | \
    sed -E 's/, Context.*gpu__time_duration.sum/ /; s/  +/ /g' | awk -v v=$v '{print v, $0}'
done
echo "== done at $(el) s"
