#!/bin/bash
# mHC seventh session (mhc2), device call 1: split-barrier cluster forward (v1*) against main (base) and a639e1f (old).
D=.carry/mhc2
mkdir -p $OUT
L=$OUT/bench.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $L
V="base old v1 v1s16x6 v1s16x4"
for rep in 1 2; do for v in $V; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $L
  timeout 12 $D/bench_$v >> $L 2>&1; echo "rc=$?" >> $L
done; done
grep -E "^===|copy|_stats \| |_prepare \| |prepare\+finish \| 16384|rc=[1-9]" $L
for v in v1 v1s16x6 v1s16x4; do
  ( timeout 100 $D/tests_$v > /tmp/t_$v.txt 2>&1; echo "rc=$?" >> /tmp/t_$v.txt ) &
  for tool in memcheck racecheck; do
    ( timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_$v \
        --gtest_filter='*Sanitize*' > /tmp/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> /tmp/s_${v}_$tool.txt ) &
  done
done
N=$OUT/ncu.txt
echo "=== ncu v1 SOL+WSS $(date -u +%T)" >> $N
timeout 25 ncu --clock-control none -k regex:MhcFwdClusterKernel --section SpeedOfLight --section WarpStateStats \
  $D/bench_v1 --profile >> $N 2>&1; echo "rc=$?" >> $N
echo "=== ncu v1 stall reasons $(date -u +%T)" >> $N
timeout 25 ncu --clock-control none -k regex:MhcFwdClusterKernel \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  $D/bench_v1 --profile >> $N 2>&1; echo "rc=$?" >> $N
wait
for v in v1 v1s16x6 v1s16x4; do echo "=== tests $v" >> $OUT/tests.txt; cat /tmp/t_$v.txt >> $OUT/tests.txt; done
grep -E "^===|PASSED|FAILED|rc=" $OUT/tests.txt | cut -c1-160
for f in /tmp/s_*.txt; do echo "=== $f" >> $OUT/sanitize.txt; cat $f >> $OUT/sanitize.txt; done
grep -E "^===|SUMMARY|rc=|PASSED|FAILED" $OUT/sanitize.txt
grep -E "^===|  [a-zA-Z_ ]*Mhc|Duration|DRAM Through|Compute \(SM\)|L2 Cache Thr|Issued Instr|stalled.*[0-9]\.[0-9]|rc=" $N | grep -vE " 0(\.0+)?$" | cut -c1-150 | head -80
date -u
