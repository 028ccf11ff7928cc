#!/bin/bash
# Device call 1: backward column-kernel variants against the current build.
D=.carry/mhc2
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/bench_all.txt 2>&1
for v in base c64s3 c64s4 c32s3; do
  echo "=== bench $v $(date -u +%H:%M:%S)" >> $OUT/bench_all.txt
  timeout 60 $D/$v/cakegrad_mhc_bench >> $OUT/bench_all.txt 2>&1; echo "rc=$?" >> $OUT/bench_all.txt
done
for v in c64s3 c32s3; do
  echo "=== tests $v $(date -u +%H:%M:%S)" >> $OUT/tests.txt
  timeout 70 $D/$v/cakegrad_gpu_mhc_tests >> $OUT/tests.txt 2>&1; echo "rc=$?" >> $OUT/tests.txt
done
for v in c64s3 c32s3; do
  echo "=== ncu $v" >> $OUT/ncu.txt
  timeout 50 ncu --clock-control none -k 'regex:MhcBwd(Token|Columns)' --section SpeedOfLight \
    --section Occupancy --section WarpStateStats $D/$v/cakegrad_mhc_bench --profile >> $OUT/ncu.txt 2>&1
done
for v in c64s3 c32s3; do
  for tool in memcheck racecheck; do
    echo "=== $tool $v" >> $OUT/sanitize.txt
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $D/$v/cakegrad_gpu_mhc_tests \
      --gtest_filter='*Sanitize*:*Cancellation*T96*' >> $OUT/sanitize.txt 2>&1; echo "rc=$?" >> $OUT/sanitize.txt
  done
done
grep -E "PASSED|FAILED|rc=|===" $OUT/tests.txt $OUT/sanitize.txt | head -40
grep -E "===|backward_finish|forward_stats" $OUT/bench_all.txt
