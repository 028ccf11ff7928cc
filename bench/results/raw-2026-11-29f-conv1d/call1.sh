#!/bin/bash
# conv1d-s6 call 1 (as run at 20:31 UTC): after-build tests (whole suite, near-zero x3), A/B bench
# alternating (main's build "before" vs conv1d-s6 "after" = candidate A of call 2), memcheck and
# racecheck on *Sanitize* (after). Outputs were tarred; unpacked here as call1_*.
D=.carry/conv1d
export PATH=$PATH:/usr/local/cuda/bin
R=$OUT/r; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm --format=csv; } > $R/env.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 200 > $R/clocks.csv 2>&1 &
SMI=$!
T=$R/tests.log
echo "=== tests after $(date -u +%T)" >> $T; timeout 60 $D/after/cakegrad_gpu_conv1d_tests >> $T 2>&1; echo "rc=$?" >> $T
echo "=== near-zero x3 after $(date -u +%T)" >> $T; timeout 20 $D/after/cakegrad_gpu_conv1d_tests --gtest_filter='Conv1dGpuNearSiluGradZero*' --gtest_repeat=3 >> $T 2>&1; echo "rc=$?" >> $T
B=$R/bench.txt
for v in before after before after before after; do
  echo "=== $v $(date -u +%T)" >> $B; timeout 30 $D/$v/cakegrad_conv1d_bench >> $B 2>&1; echo "=== $v done rc=$? $(date -u +%T)" >> $B
done
M=$R/memcheck.log
echo "=== memcheck after $(date -u +%T)" >> $M; timeout 60 compute-sanitizer --tool memcheck $D/after/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*' >> $M 2>&1; echo "rc=$?" >> $M
K=$R/racecheck.log
echo "=== racecheck after $(date -u +%T)" >> $K; timeout 60 compute-sanitizer --tool racecheck $D/after/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*' >> $K 2>&1; echo "rc=$?" >> $K
kill $SMI
cd $OUT && tar czf conv1d_s6_call1.tgz r && rm -rf r
