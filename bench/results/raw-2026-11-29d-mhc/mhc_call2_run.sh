#!/bin/bash
# mHC fourth session, device call 2: candidates against HEAD (base), tests, ncu, sanitizers.
D=.carry/mhc
mkdir -p $OUT
L=$OUT/bench.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $L
cp $D/SOURCE $OUT/SOURCE.txt
V="base shipA shipA8 shipB shipB4 shipC"
for rep in 1 2; do for v in $V; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $L
  timeout 15 $D/$v/cakegrad_mhc_bench >> $L 2>&1; echo "rc=$?" >> $L
done; done
grep -E "^===|_finish \| 16384|_stats \| 16384|_prepare \| 16384|prepare\+finish \| 16384|stats \| 4096|finish \| 4096" $L | grep -v "forward_finish\|backward_prepare"
for v in shipA shipA8 shipB shipB4 shipC; do
  ( timeout 100 $D/$v/cakegrad_gpu_mhc_tests > /tmp/t_$v.txt 2>&1; echo "rc=$?" >> /tmp/t_$v.txt ) &
done
wait
for v in shipA shipA8 shipB shipB4 shipC; do echo "=== tests $v" >> $OUT/tests.txt; cat /tmp/t_$v.txt >> $OUT/tests.txt; done
grep -E "^===|PASSED|FAILED|rc=" $OUT/tests.txt
N=$OUT/ncu.txt
echo "=== ncu shipC $(date -u +%T)" >> $N
timeout 35 ncu --clock-control none -k regex:Mhc --section SpeedOfLight $D/shipC/cakegrad_mhc_bench --profile >> $N 2>&1
echo "=== ncu shipB4 $(date -u +%T)" >> $N
timeout 20 ncu --clock-control none -k regex:MhcBwdColumns --section SpeedOfLight $D/shipB4/cakegrad_mhc_bench --profile >> $N 2>&1
grep -E "^===|  [a-z ]*Mhc|Duration|DRAM Through|Compute \(SM\)|L1/TEX Cache" $N | cut -c1-110
for v in shipC shipA8; do for tool in memcheck racecheck; do
  ( timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 $D/$v/cakegrad_gpu_mhc_tests \
      --gtest_filter='*Sanitize*:*Cancellation*T96*' > /tmp/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> /tmp/s_${v}_$tool.txt ) &
done; done
( timeout 70 compute-sanitizer --tool synccheck --error-exitcode 9 $D/shipC/cakegrad_gpu_mhc_tests \
    --gtest_filter='*Sanitize*' > /tmp/s_shipC_synccheck.txt 2>&1; echo "rc=$?" >> /tmp/s_shipC_synccheck.txt ) &
wait
for f in /tmp/s_*.txt; do echo "=== $f" >> $OUT/sanitize.txt; cat $f >> $OUT/sanitize.txt; done
grep -E "^===|SUMMARY|rc=" $OUT/sanitize.txt
date -u
