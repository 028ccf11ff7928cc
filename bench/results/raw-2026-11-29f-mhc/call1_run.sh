#!/bin/bash
# mHC sixth session, device call: one-pass cluster forward (new, s16) against main (base).
D=.carry/mhc
mkdir -p $OUT
L=$OUT/bench.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $L
echo "=== probe" >> $L; timeout 20 $D/probe >> $L 2>&1; echo "rc=$?" >> $L
V="base new s16"
for rep in 1 2; do for v in $V; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $L
  timeout 20 $D/bench_$v >> $L 2>&1; echo "rc=$?" >> $L
done; done
grep -E "^===|copy|probe|max active|_stats \| |_prepare \| |forward_finish \| 16384|prepare\+finish \| 16384" $L
for v in new s16; do
  ( timeout 170 $D/tests_$v > /tmp/t_$v.txt 2>&1; echo "rc=$?" >> /tmp/t_$v.txt ) &
done
for v in new s16; do for tool in memcheck racecheck; do
  ( timeout 170 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_$v \
      --gtest_filter='*Sanitize*' > /tmp/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> /tmp/s_${v}_$tool.txt ) &
done; done
wait
for v in new s16; do echo "=== tests $v" >> $OUT/tests.txt; cat /tmp/t_$v.txt >> $OUT/tests.txt; done
grep -E "^===|PASSED|FAILED|rc=|tests ran|rel-L2 T=(1|7|45|4096|16384) C=4096" $OUT/tests.txt | cut -c1-200
for f in /tmp/s_*.txt; do echo "=== $f" >> $OUT/sanitize.txt; cat $f >> $OUT/sanitize.txt; done
grep -E "^===|SUMMARY|rc=|PASSED|FAILED" $OUT/sanitize.txt
N=$OUT/ncu.txt
echo "=== ncu new $(date -u +%T)" >> $N
timeout 40 ncu --clock-control none -k regex:MhcFwd --section SpeedOfLight $D/bench_new --profile >> $N 2>&1
echo "rc=$?" >> $N
grep -E "^===|  [a-zA-Z_ <>,0-9]*Mhc|Duration|DRAM Through|Compute \(SM\)|L1/TEX Cache|L2 Cache Thr|rc=" $N | cut -c1-120
date -u
