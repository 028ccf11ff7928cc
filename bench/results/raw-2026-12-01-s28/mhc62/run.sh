#!/usr/bin/env bash
# mhc62: mhc61 with dfn's hi and lo of logits 0..15 summed by the MMAs (two dfn row tiles instead of three,
# 16 registers fewer: consumer spill 140 -> 84 bytes). Bitwise test, bench vs main, ncu of both.
# then ncu of the fused kernel at T = 16384.
set -uo pipefail
C=.carry/mhc62
O=${OUT:-/tmp}/mhc62
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
T=$C/cand/cakegrad_gpu_mhc_tests
timeout 120 $T --gtest_filter='MhcKernels.SinglePassAndTwoPass*:*MhcKernelsAccuracy*T16384_C4096*:*Cancellation*' > "$O/bitwise.txt" 2>&1
echo "bitwise+accuracy rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$O/bitwise.txt" | tr '\n' ' ') at $(el) s"
grep -E "Failure|: dX|: dfn|trap|error" "$O/bitwise.txt" | head -8
for r in 1 2 3; do
  for v in base cand; do
    timeout 60 $C/$v/cakegrad_mhc_bench > "$O/bench_${v}_$r.txt" 2>&1
    grep -E "^\| backward_finish" "$O/bench_${v}_$r.txt" | sed "s/^/r$r $v /" | cut -c1-100
  done
done
for v in base cand; do timeout 120 ncu --kernel-name regex:"MhcBwd(Fused|Columns|Token|Sinkhorn|Dpre)" --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis $C/$v/cakegrad_mhc_bench --profile > "$O/ncu_$v.txt" 2>&1; done
echo "ncu rc=$?"
for v in base cand; do grep -E "^  [a-z ]*unnamed>::MhcBwd|Duration|DRAM Throughput|Local Memory Spilling Requests|Warp Cycles Per Issued" "$O/ncu_$v.txt" | sed "s/(const.*//" | cut -c1-90; done
echo "== done at $(el) s"
