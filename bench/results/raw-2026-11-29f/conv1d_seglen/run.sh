#!/usr/bin/env bash
# conv1d backward segment length A/B (sixth session): main (L = 64) vs L = 136 and L = 100.
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
D=.carry/c1d
L=$(mktemp -d)
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 250 > $L/clocks.csv &
cl=$!
for v in main L136 L100 main L136 L100; do
  echo "== $v"; timeout 60 $D/$v/cakegrad_conv1d_bench 2>&1 | grep -E "copy|backward|forward"
done > $L/bench.txt
kill $cl
for v in L136 L100; do
  timeout 60 $D/$v/cakegrad_gpu_conv1d_tests > $L/tests_$v.log 2>&1; echo "$v tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $L/tests_$v.log | tr '\n' ' ')"
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $D/$v/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*' > $L/memcheck_$v.log 2>&1; echo "$v memcheck rc=$? $(grep 'ERROR SUMMARY' $L/memcheck_$v.log)"
done
cp -r $L/. $OUT/
grep -E "^==|32768 \|  4096 \| (bf16|fp32)" $L/bench.txt | grep -E "^==|16 B"
