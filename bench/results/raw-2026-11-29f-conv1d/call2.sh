#!/bin/bash
# conv1d-s6 call 2: A/B bench alternating (main "before"; A = table, 256-thread CTAs, sign at
# byte 0x8000; B = A with the table's sign at 0x4000 (32 KB); C = A with 512-thread CTAs; D = B with ring depth 12), then
# per candidate the whole suite, memcheck and racecheck on *Sanitize* (candidates in parallel).
D=.carry/conv1d
export PATH=$PATH:/usr/local/cuda/bin
R=$OUT
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm --format=csv; } > $R/env.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 200 > $R/clocks.csv 2>&1 &
SMI=$!
B=$R/bench.txt
for v in before A B C D before A B C D; do
  echo "=== $v $(date -u +%T)" >> $B; timeout 20 $D/$v/cakegrad_conv1d_bench >> $B 2>&1; echo "=== $v done rc=$? $(date -u +%T)" >> $B
done
kill $SMI
grep -E "^===|copy|\| (forward|backward)" $B | grep -v done | awk '/^===/{print; next} /copy/{print $5; next} {print $2,$4,$6,$8,$10,$12,$15,$21}'
PIDS=()
for v in A B C D; do
  ( L=$R/check_$v.log
    echo "=== memcheck $v $(date -u +%T)" >> $L; timeout 30 compute-sanitizer --tool memcheck $D/$v/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*' >> $L 2>&1; echo "rc=$?" >> $L
    echo "=== racecheck $v $(date -u +%T)" >> $L; timeout 30 compute-sanitizer --tool racecheck $D/$v/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*' >> $L 2>&1; echo "rc=$?" >> $L
    echo "=== tests $v $(date -u +%T)" >> $L; timeout 60 $D/$v/cakegrad_gpu_conv1d_tests >> $L 2>&1; echo "rc=$?" >> $L
    echo "=== end $v $(date -u +%T)" >> $L ) &
  PIDS+=($!)
done
wait "${PIDS[@]}"
for v in A B C D; do grep -E "^===|PASSED|FAILED|rc=|ERROR SUMMARY|RACECHECK SUMMARY|C=[0-9]+:|dx bf16 +rel" $R/check_$v.log | head -60; done
