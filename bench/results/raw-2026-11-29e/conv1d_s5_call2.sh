#!/bin/bash
# Call 2: four env-free final candidates, each with the whole conv1d suite and memcheck, then
# alternating benches against the base build (bedaf00).
#   A eff67ca: param loads before the doc search, reduce 8 loads in flight, bench warm-up
#   B cff7c0e: A + uniform backward body blocks
#   C bb1d8ec: B + 128-thread forward CTAs (6/SM)
#   D        : A's backward + C's forward
D=.carry/conv1d-s5
cd "$(dirname "$0")/../.." || exit 1
export PATH=$PATH:/usr/local/cuda/bin
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm --format=csv; } > $OUT/env.txt 2>&1
T=$OUT/tests.log; M=$OUT/memcheck.log
for c in C D B A; do
  echo "=== tests $c" >> $T; $D/tests_$c >> $T 2>&1; echo "rc=$?" >> $T
  echo "=== memcheck $c" >> $M; compute-sanitizer --tool memcheck $D/tests_$c --gtest_filter='*Sanitize*' >> $M 2>&1; echo "rc=$?" >> $M
done
grep -E "^===|PASSED|FAILED|rc=|tests ran" $T; grep -E "^===|ERROR SUMMARY|rc=" $M
B=$OUT/bench.txt
for v in base A B C D A B C D base; do
  echo "=== $v" >> $B; $D/bench_$v >> $B 2>&1; echo "=== $v done $(date -u +%T)" >> $B
done
grep -E "^===|copy|\| (forward|backward)" $B | grep -v done | awk '/^===/{print; next} /copy/{print $5; next} {print $2,$4,$6,$8,$10,$12,$15,$21}'
