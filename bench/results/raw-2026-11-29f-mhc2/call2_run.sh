#!/bin/bash
# mHC seventh session (mhc2), device call 2: split-barrier cluster forward variants against main.
D=.carry/mhc2
mkdir -p $OUT
L=$OUT/bench.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $L
V="base old v1 v1r r w16 w16r"
for rep in 1 2; do for v in $V; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $L
  timeout 12 $D/bench_$v >> $L 2>&1; echo "rc=$?" >> $L
done; done
S=$OUT/sweep.txt
for rep in 1 2; do for v in base2 v1r r w16 w16r; do
  echo "=== sweep $v rep$rep $(date -u +%T)" >> $S
  MHC_BENCH_T=2048,4096,8192,12288,16384 timeout 15 $D/bench_$v >> $S 2>&1; echo "rc=$?" >> $S
done; done
grep -E "^===|copy|_stats \| |_prepare \| |prepare\+finish \| 16384|rc=[1-9]" $L | grep -v backward
grep -E "^===|_stats \| |_prepare \| |rc=[1-9]" $S | grep -v backward
for v in base v1r r w16 w16r; do
  ( timeout 95 $D/tests_$v > /tmp/t_$v.txt 2>&1; echo "rc=$?" >> /tmp/t_$v.txt ) &
done
for v in v1r r w16 w16r; do for tool in memcheck racecheck; do
  ( timeout 95 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_$v \
      --gtest_filter='*Sanitize*' > /tmp/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> /tmp/s_${v}_$tool.txt ) &
done; done
N=$OUT/ncu.txt
for v in w16r r; do
  echo "=== ncu $v SOL+WSS+stalls (tests running concurrently) $(date -u +%T)" >> $N
  timeout 30 ncu --clock-control none -k regex:MhcFwdClusterKernel --launch-count 2 \
    --section SpeedOfLight --section WarpStateStats \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    $D/bench_$v --profile >> $N 2>&1; echo "rc=$?" >> $N
done
wait
for v in base v1r r w16 w16r; do echo "=== tests $v" >> $OUT/tests.txt; cat /tmp/t_$v.txt >> $OUT/tests.txt; done
grep -E "^===|PASSED|FAILED|rc=" $OUT/tests.txt | cut -c1-160
for f in /tmp/s_*.txt; do echo "=== $f" >> $OUT/sanitize.txt; cat $f >> $OUT/sanitize.txt; done
grep -E "^===|SUMMARY|rc=|PASSED|FAILED" $OUT/sanitize.txt
grep -E "^===|  [a-zA-Z_ ]*Mhc|Duration|DRAM Through|Compute \(SM\)|L2 Cache Thr|Issued Instr|stalled.*[0-9]\.[0-9]|rc=" $N | grep -vE " 0\.0[0-9]$" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-120 | head -80
date -u
