#!/bin/bash
# mHC helper mhc7, device call 1: backward_finish variants against main f19a170 (base).
D=.carry/mhc7
mkdir -p $OUT
L=$OUT/bench.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $L
V="base v1 v2 v3 v4"
H=$OUT/hash.txt
for v in $V; do echo "=== hash $v" >> $H; timeout 40 $D/hash_$v >> $H 2>&1; echo "rc=$?" >> $H; done
for rep in 1 2; do for v in $V; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $L
  MHC_BENCH_T=4096,16384 timeout 30 $D/bench_$v >> $L 2>&1; echo "rc=$?" >> $L
done; done
N=$OUT/ncu.txt
echo "=== ncu v4 $(date -u +%T)" >> $N
timeout 45 ncu --clock-control none -k regex:MhcBwd --launch-count 3 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis_Tables $D/bench_v4 --profile >> $N 2>&1; echo "rc=$?" >> $N
for v in $V; do
  ( timeout 150 $D/tests_$v > /tmp/t_$v.txt 2>&1; echo "rc=$?" >> /tmp/t_$v.txt ) &
done
for v in v4; do for tool in memcheck racecheck; do
  ( timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_$v \
      --gtest_filter='*Sanitize*' > /tmp/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> /tmp/s_${v}_$tool.txt ) &
done; done
wait
for v in $V; do echo "=== tests $v" >> $OUT/tests.txt; cat /tmp/t_$v.txt >> $OUT/tests.txt; done
for f in /tmp/s_*.txt; do echo "=== $f" >> $OUT/sanitize.txt; cat $f >> $OUT/sanitize.txt; done
# (summary greps omitted here)
