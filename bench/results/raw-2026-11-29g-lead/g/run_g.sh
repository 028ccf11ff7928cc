#!/bin/bash
# conv1d-s8 (helper conv1d8): A/B of main (base) against G (conv1d-s8-g 3ede2d9), three runs each, alternating,
# with a 100 ms clock log; then the whole conv1d suite, memcheck and racecheck on *Sanitize* for
# D and F (in parallel).
set -u
export PATH=$PATH:/usr/local/cuda/bin
D=.carry/conv1d8
R=$OUT; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit --format=csv; } > $R/env.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 100 > $R/clocks.csv 2>&1 &
SMI=$!
B=$R/bench.txt
for v in base G base G base G; do
  echo "=== $v $(date -u +%T.%N)" >> $B; timeout 12 $D/$v/cakegrad_conv1d_bench >> $B 2>&1; echo "=== $v done rc=$? $(date -u +%T.%N)" >> $B
done
kill $SMI
awk -F'|' '/^=== /{split($0,f," "); v=f[2]; next} /\| (backward|forward)/{for(i=2;i<=8;i++) gsub(/ /,"",$i); k=v" "$2" "$3"x"$4" "$5" "$6" "$7; a[k]=a[k]" "$8} /copy/{split($0,f," "); c[v]=c[v]" "f[6]} END{for(k in a) print k":"a[k]; for(k in c) print "copy "k":"c[k]}' $B | sort > $R/summary.txt
PIDS=()
for v in G; do
  ( L=$R/check_$v.log
    echo "=== tests $v $(date -u +%T)" >> $L; timeout 45 $D/$v/cakegrad_gpu_conv1d_tests >> $L 2>&1; echo "rc=$?" >> $L
    echo "=== memcheck $v $(date -u +%T)" >> $L; timeout 25 compute-sanitizer --tool memcheck --error-exitcode 9 $D/$v/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*' >> $L 2>&1; echo "rc=$?" >> $L
    echo "=== racecheck $v $(date -u +%T)" >> $L; timeout 30 compute-sanitizer --tool racecheck --error-exitcode 9 $D/$v/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*' >> $L 2>&1; echo "rc=$?" >> $L
    echo "=== end $v $(date -u +%T)" >> $L ) &
  PIDS+=($!)
done
wait "${PIDS[@]}"
grep "16 B" $R/summary.txt | grep -v forward
for v in G; do grep -E "^===|^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY" $R/check_$v.log | head -30; done
