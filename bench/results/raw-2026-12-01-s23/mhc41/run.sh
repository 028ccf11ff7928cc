#!/usr/bin/env bash
# mhc41 (twenty-third session): is the split-K forward_stats kernel (2.17 us a stage at 91% of
# the copy rate) bound by DRAM or by its MMAs? ncu SpeedOfLight, ComputeWorkloadAnalysis (pipe
# utilization), WarpStateStats and MemoryWorkloadAnalysis of main's split-K kernel (template
# argument 0) and of forward_prepare's cluster kernel (1) at T = 16384, the bench's second call.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc41
for tag in 0 1; do
  MHC_BENCH_T=16384 timeout 120 ncu --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
    --kernel-name-base demangled -k "regex:MhcFwdClusterKernel<.*bool.$tag>" --launch-skip 1 -c 1 \
    $D/base/cakegrad_mhc_bench > "$AB_OUT/ncu_$tag.txt" 2>&1
  echo "== template argument $tag"
  grep -E "MhcFwd|Duration|Throughput|Pipe|pipe|Issue Slots|Executed Ipc|Warp Cycles|Stall|Active Warps|Tensor|Busy" \
    "$AB_OUT/ncu_$tag.txt" | grep -v "==PROF" | head -40
done
ab_pack; echo "== done at $(ab_el) s"
