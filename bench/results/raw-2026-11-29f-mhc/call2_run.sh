#!/bin/bash
# mHC sixth session, device call 2: TMA cluster forward (new, s16, s16x6) against main (base).
D=.carry/mhc
mkdir -p $OUT
L=$OUT/bench.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $L
V="base new s16 s16x6"
for rep in 1 2; do for v in $V; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $L
  timeout 12 $D/bench_$v >> $L 2>&1; echo "rc=$?" >> $L
done; done
grep -E "^===|copy|_stats \| |_prepare \| |forward_finish \| 16384|prepare\+finish \| 16384" $L
for v in base new s16 s16x6; do
  ( timeout 90 $D/tests_$v > /tmp/t_$v.txt 2>&1; echo "rc=$?" >> /tmp/t_$v.txt ) &
done
for v in new s16 s16x6; do for tool in memcheck racecheck; do
  ( timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_$v \
      --gtest_filter='*Sanitize*' > /tmp/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> /tmp/s_${v}_$tool.txt ) &
done; done
wait
for v in base new s16 s16x6; do echo "=== tests $v" >> $OUT/tests.txt; cat /tmp/t_$v.txt >> $OUT/tests.txt; done
grep -E "^===|PASSED|FAILED|rc=|rel-L2 T=(45|16384) C=4096" $OUT/tests.txt | cut -c1-160
for f in /tmp/s_*.txt; do echo "=== $f" >> $OUT/sanitize.txt; cat $f >> $OUT/sanitize.txt; done
grep -E "^===|SUMMARY|rc=|PASSED|FAILED" $OUT/sanitize.txt
N=$OUT/ncu.txt
echo "=== ncu new $(date -u +%T)" >> $N
timeout 30 ncu --clock-control none -k regex:MhcFwdC --section SpeedOfLight --section WarpStateStats \
  $D/bench_new --profile >> $N 2>&1
echo "rc=$?" >> $N
grep -E "^===|  [a-zA-Z_ ]*Mhc|Duration|DRAM Through|Compute \(SM\)|L2 Cache Thr|Stall|rc=" $N | cut -c1-150 | head -60
date -u
