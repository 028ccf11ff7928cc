#!/bin/bash
# Call 1 (scratch commit 7a64ab1 as .carry/conv1d-s5/{tests,bench}; bedaf00's bench as bench_base):
# correctness of the candidate (all forward segment lengths), memcheck, then the A/B bench.
D=.carry/conv1d-s5
cd "$(dirname "$0")/../.." || exit 1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm --format=csv; } > $OUT/env.txt 2>&1
T=$OUT/tests.log
echo "=== default" >> $T; $D/tests --gtest_filter='*Conv1d*' >> $T 2>&1; echo "rc=$?" >> $T
for L in 48 56 64; do
  echo "=== CONV1D_FWD_SEGLEN=$L" >> $T
  CONV1D_FWD_SEGLEN=$L $D/tests --gtest_filter='*Conv1dGpuShapes*:*Determinism*:*Sanitize*:*Malformed*' >> $T 2>&1; echo "rc=$?" >> $T
done
echo "=== CONV1D_FAST=0" >> $T
CONV1D_FAST=0 $D/tests --gtest_filter='*Conv1dGpuShapes*:*Determinism*' >> $T 2>&1; echo "rc=$?" >> $T
grep -E "^===|PASSED|FAILED|rc=" $T
PATH=$PATH:/usr/local/cuda/bin compute-sanitizer --tool memcheck $D/tests --gtest_filter='*Sanitize*' > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -2 $OUT/memcheck.log
B=$OUT/bench.txt
for v in base new nofast L64 L56 L48 new2 base2; do
  echo "=== $v" >> $B
  case $v in
    base|base2) $D/bench_base >> $B 2>&1;;
    new|new2) $D/bench >> $B 2>&1;;
    nofast) CONV1D_FAST=0 $D/bench >> $B 2>&1;;
    L*) CONV1D_FWD_SEGLEN=${v#L} $D/bench >> $B 2>&1;;
  esac
  echo "=== $v done $(date -u +%T)" >> $B
done
grep -E "^===|copy|\| (forward|backward)" $B | awk '/^===/{print; next} /copy/{print; next} {print $2,$4,$6,$8,$10,$12,$15,$21}' | head -150
(PATH=$PATH:/usr/local/cuda/bin cuobjdump -sass $D/bench | gzip > $OUT/bench_sass.txt.gz) 2>&1 | tail -2
