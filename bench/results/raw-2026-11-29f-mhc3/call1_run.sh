#!/bin/bash
# mHC helper mhc3, device call 1: cluster forward variants (sq on the tensor cores, lean sums,
# 2-tile MMA chains, fast coefficient divisions) against main 315b8c8, at T = 2048 .. 65536.
D=.carry/mhc3
mkdir -p $OUT
L=$OUT/sweep.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $L
V="base r0 sq lean lean2 leanf lean2f"
for rep in 1 2; do for v in $V; do
  echo "=== sweep $v rep$rep $(date -u +%T)" >> $L
  MHC_BENCH_T=2048,4096,8192,12288,16384,32768,65536 timeout 20 $D/bench_$v >> $L 2>&1; echo "rc=$?" >> $L
done; done
grep -E "^===|copy|forward_stats \| |forward_prepare \| |prepare\+finish \| |rc=[1-9]" $L
for v in $V; do
  ( timeout 100 $D/tests_$v > /tmp/t_$v.txt 2>&1; echo "rc=$?" >> /tmp/t_$v.txt ) &
done
for v in lean lean2 leanf lean2f; do for tool in memcheck racecheck; do
  ( timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_$v \
      --gtest_filter='*Sanitize*' > /tmp/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> /tmp/s_${v}_$tool.txt ) &
done; done
N=$OUT/ncu.txt
for v in r0 lean lean2; do
  echo "=== ncu $v (tests running concurrently) $(date -u +%T)" >> $N
  timeout 25 ncu --clock-control none -k regex:MhcFwdClusterKernel --launch-count 2 \
    --section SpeedOfLight --section WarpStateStats \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    $D/bench_$v --profile >> $N 2>&1; echo "rc=$?" >> $N
done
wait
for v in $V; do echo "=== tests $v" >> $OUT/tests.txt; cat /tmp/t_$v.txt >> $OUT/tests.txt; done
grep -E "^===|PASSED|FAILED|rc=" $OUT/tests.txt | cut -c1-160
for f in /tmp/s_*.txt; do echo "=== $f" >> $OUT/sanitize.txt; cat $f >> $OUT/sanitize.txt; done
grep -E "^===|SUMMARY|rc=|PASSED|FAILED" $OUT/sanitize.txt
grep -E "^===|  [a-zA-Z_ ]*Mhc|Duration|DRAM Through|Compute \(SM\)|Issued Instr|stalled.*[0-9]\.[0-9]|rc=" $N | grep -vE " 0\.0[0-9]$" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-110 | head -90
date -u
