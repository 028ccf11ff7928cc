#!/usr/bin/env bash
# mhc61: mhc60's single-pass backward_finish with two finishing warps, the finish inputs loaded
# before the wait and no ring guard in the publisher. Bitwise test, bench (3 rounds vs main),
# then ncu of the fused kernel at T = 16384.
set -uo pipefail
C=.carry/mhc61
O=${OUT:-/tmp}/mhc61
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
timeout 120 ncu --kernel-name regex:MhcBwd --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis $C/cand/cakegrad_mhc_bench --profile > "$O/ncu.txt" 2>&1
echo "ncu rc=$?"
grep -E "MhcBwd|Duration|DRAM Throughput|L1/TEX Cache Throughput|Memory Throughput|Stall|Warp Cycles Per Issued" "$O/ncu.txt" | head -60
echo "== done at $(el) s"
