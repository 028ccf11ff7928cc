#!/usr/bin/env bash
# kda82: the sequential backward's token pass (seq-token-vectors 9e39df9) and the chunked grad
# kernel's sigmoid' from ex2/rcp (chunked-gate-derivative 430aa4e), together as `cand`
# (s27-candidate dbb7c52), against main 05e1e8f (`base`).
set -uo pipefail
C=.carry/kda82
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp}/kda82
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== hashes (sequential: expected equal; chunked: expected different, the gate fix)"
for v in base cand; do
  timeout 120 $C/$v/cakegrad_gpu_kda_tests \
    --gtest_filter='KdaKernels.SequentialBackwardHashes*:KdaKernels.ChunkedBackwardHashes*' \
    > "$O/hashes_$v.txt" 2>&1
  echo "$v rc=$?"
  grep -E "^\[ kda (seq )?bwd hashes" "$O/hashes_$v.txt" | sed "s/^/$v /" | sed 's/workspace [0-9a-f]* //'
done
echo "== cand suite at $(el) s"
timeout 320 $C/cand/cakegrad_gpu_kda_tests > "$O/tests_cand.txt" 2>&1
echo "rc=$?"
grep -E "^\[ kda \].*(dA_log|ddt_bias|dinitial)" "$O/tests_cand.txt" | awk '{print $5, $7}' | sort -k2 -g | tail -3
grep -E "FAILED|^\[  PASSED|^\[  FAILED" "$O/tests_cand.txt" | sort | uniq -c
echo "== sequential bench at $(el) s (default at H < 4)"
for round in 1 2; do
  for v in base cand; do
    for h in 1 2; do
      [ "$round" = 2 ] && [ "$h" = 2 ] && continue
      KDA_BENCH_CASES=01 KDA_BENCH_H=$h timeout 150 $C/$v/cakegrad_kda_bench > "$O/bench_seq_${v}_h${h}_r$round.txt" 2>&1
      grep -E "bwd  median" "$O/bench_seq_${v}_h${h}_r$round.txt" | sed "s/^/r$round $v H=$h /" | cut -c1-110
    done
  done
done
echo "== chunked-only bench at $(el) s"
for round in 1 2; do
  for v in base cand; do
    KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=012 timeout 150 $C/$v/cakegrad_kda_bench > "$O/bench_chunked_${v}_r$round.txt" 2>&1
    grep -E "bwd chunked  median" "$O/bench_chunked_${v}_r$round.txt" | sed "s/^/r$round $v /" | cut -c1-100
  done
done
echo "== ncu, sequential kernels at (1, 8192, 1), at $(el) s"
for v in base cand; do
  [ "$(el)" -lt 520 ] || break
  KDA_BENCH_CASES=0 KDA_BENCH_H=1 timeout 60 ncu --metrics gpu__time_duration.sum \
    -k regex:"KdaTokenPass|KdaRowPass|KdaSegmentScan|KdaBackwardKernel" -c 8 \
    $C/$v/cakegrad_kda_bench > "$O/ncu_$v.txt" 2>&1
  grep -E "Kda[A-Za-z]*Kernel|gpu__time_duration" "$O/ncu_$v.txt" | paste - - | \
    sed -E 's/\(.*\)//; s/  +/ /g' | awk -v v=$v '{print v, $0}' | cut -c1-140
done
echo "== done at $(el) s"
