#!/usr/bin/env bash
# After the final call's conv1d failure (Sweep/Conv1dGpuShapes.MatchesFp64/C7_one_doc: 3 of 28693
# dx elements outside the bound against the pure-FP64 preactivation, floor 1): the conv1d suite
# with the floor at one preactivation flip (4) and the bad elements' positions printed, then 40
# fresh draws of that shape to see how often and in what pattern such elements occur.
set -uo pipefail
tar xJf .carry/gpu.tar.xz
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
T=.carry/gpu/bin/cakegrad_gpu_conv1d_tests
timeout 120 $T > $OUT/gpu_conv1d_tests.log 2>&1; echo "suite rc=$?"; grep -E "PASSED|FAILED" $OUT/gpu_conv1d_tests.log | tail -3
timeout 120 $T --gtest_filter='Sweep/Conv1dGpuShapes.MatchesFp64/C7_one_doc' --gtest_repeat=40 \
  > $OUT/c7_repeat.log 2>&1; echo "repeat rc=$?"
grep "dx bf16 (FP64)" $OUT/c7_repeat.log | awk '{print $6}' | sort | uniq -c
grep "dx bf16 (FP64)" $OUT/c7_repeat.log | grep ", at " | head -10
