#!/bin/bash
# Device call 3 (final): candidates against HEAD (base), tests, sanitizers, ncu.
D=.carry/mhc2
mkdir -p $OUT
B=$OUT/bench_all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv > $B 2>&1
for rep in 1 2; do for v in base N64 N32 N64b N64t; do
  echo "=== bench $v rep$rep $(date -u +%H:%M:%S)" >> $B
  timeout 30 $D/$v/cakegrad_mhc_bench >> $B 2>&1; echo "rc=$?" >> $B
done; done
for v in N64 N32 N64b N64t; do
  ( timeout 100 $D/$v/cakegrad_gpu_mhc_tests > /tmp/tests_$v.txt 2>&1; echo "rc=$?" >> /tmp/tests_$v.txt ) &
done
wait
for v in N64 N32 N64b N64t; do echo "=== tests $v" >> $OUT/tests_all.txt; cat /tmp/tests_$v.txt >> $OUT/tests_all.txt; done
for v in N64 N32; do for tool in memcheck racecheck; do
  ( timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $D/$v/cakegrad_gpu_mhc_tests \
      --gtest_filter='*Sanitize*:*Cancellation*T96*' > /tmp/san_${v}_$tool.txt 2>&1; echo "rc=$?" >> /tmp/san_${v}_$tool.txt ) &
done; done
wait
for f in /tmp/san_*.txt; do echo "=== $f" >> $OUT/sanitize.txt; cat $f >> $OUT/sanitize.txt; done
echo "=== ncu N64" >> $OUT/ncu.txt
timeout 45 ncu --clock-control none -k regex:Mhc --section SpeedOfLight $D/N64/cakegrad_mhc_bench --profile >> $OUT/ncu.txt 2>&1
echo "=== ncu N32" >> $OUT/ncu.txt
timeout 30 ncu --clock-control none -k regex:MhcBwdColumns --section SpeedOfLight $D/N32/cakegrad_mhc_bench --profile >> $OUT/ncu.txt 2>&1
grep -E "^===|PASSED|FAILED|rc=" $OUT/tests_all.txt
grep -E "^===|SUMMARY|rc=" $OUT/sanitize.txt
grep -E "^===|_finish|_stats|_prepare" $B | grep -v "^| forward_finish\|backward_prepare"
grep -E "^===|Mhc|Duration|DRAM Through" $OUT/ncu.txt | cut -c1-100
