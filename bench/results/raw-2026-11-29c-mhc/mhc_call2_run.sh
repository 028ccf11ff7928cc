#!/bin/bash
# Device call 2: column kernel with conflict-free coef rows; 16 vs 32 columns a warp, 3 vs 4 stages.
D=.carry/mhc2
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/bench_all.txt 2>&1
for rep in 1 2; do for v in base A B C D; do
  echo "=== bench $v rep$rep $(date -u +%H:%M:%S)" >> $OUT/bench_all.txt
  timeout 30 $D/$v/cakegrad_mhc_bench >> $OUT/bench_all.txt 2>&1; echo "rc=$?" >> $OUT/bench_all.txt
done; done
for v in A B; do
  echo "=== ncu $v" >> $OUT/ncu.txt
  timeout 40 ncu --clock-control none -k 'regex:MhcBwd(Columns|Reduce)' --section SpeedOfLight \
    --section Occupancy --section WarpStateStats $D/$v/cakegrad_mhc_bench --profile >> $OUT/ncu.txt 2>&1
done
for v in A B; do
  echo "=== tests $v $(date -u +%H:%M:%S)" >> $OUT/tests.txt
  timeout 60 $D/$v/cakegrad_gpu_mhc_tests >> $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
  for tool in memcheck racecheck; do
    echo "=== $tool $v" >> $OUT/sanitize.txt
    timeout 30 compute-sanitizer --tool $tool --error-exitcode 9 $D/$v/cakegrad_gpu_mhc_tests \
      --gtest_filter='*Sanitize*:*Cancellation*T96*' >> $OUT/sanitize.txt 2>&1; echo "rc=$?" >> $OUT/sanitize.txt
  done
done
for v in C D; do
  echo "=== tests $v $(date -u +%H:%M:%S)" >> $OUT/tests.txt
  timeout 45 $D/$v/cakegrad_gpu_mhc_tests >> $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
done
grep -E "PASSED|FAILED|rc=|===|SUMMARY" $OUT/tests.txt $OUT/sanitize.txt | head -60
grep -E "===|backward_finish" $OUT/bench_all.txt
grep -E "===|Columns|Duration|L1/TEX|DRAM Through|Issued|Registers" $OUT/ncu.txt | cut -c1-110
