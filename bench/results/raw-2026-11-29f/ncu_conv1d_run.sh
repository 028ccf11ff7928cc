#!/usr/bin/env bash
# Sixth session: where the "bf16" conv1d backward's time goes (32768 x 4096, bias, 16-byte route:
# the first backward configuration of cakegrad_conv1d_bench, caught in its warm-up). Run on the
# GPU machine from the repo root with .carry/gpu carried; output in $OUT.
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
B=.carry/gpu/bin/cakegrad_conv1d_bench
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
  cat .carry/gpu/SOURCE
  timeout 200 ncu --clock-control none -k regex:Conv1dBwdMainKernel --launch-skip 10 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section InstructionStats --section SourceCounters "$B"
} > "$OUT/ncu_conv1d.txt" 2>&1
echo "rc=$?"
grep -E "Duration|Warp Cycles Per Issued|Issue Slots Busy|Stall|Achieved Occupancy|DRAM Throughput|L1/TEX Hit|Bank" "$OUT/ncu_conv1d.txt" | head -40
