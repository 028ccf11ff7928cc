#!/bin/bash
# Lead, session 8: A/B of main (base) against the asynchronous SiLU'-table copy (tab), three runs
# each, alternating, each measurement after 500 ms idle; then tab's whole conv1d suite, memcheck
# and racecheck on *Sanitize*.
set -u
export PATH=$PATH:/usr/local/cuda/bin
D=.carry/c1dt
R=$OUT/c1dt; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/env.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,temperature.gpu --format=csv -lms 100 > $R/clocks.csv 2>&1 &
SMI=$!
B=$R/bench.txt
for v in base tab base tab base tab; do
  echo "=== $v $(date -u +%T.%N)" >> $B; CAKEGRAD_BENCH_REST_MS=500 timeout 40 $D/$v/cakegrad_conv1d_bench >> $B 2>&1; echo "=== $v done rc=$? $(date -u +%T.%N)" >> $B
done
kill $SMI
awk -F'|' '/^=== /{split($0,f," "); v=f[2]; next} /\| (backward|forward)/{for(i=2;i<=8;i++) gsub(/ /,"",$i); k=v" "$2" "$3"x"$4" "$5" "$6" "$7; a[k]=a[k]" "$8} /copy/{split($0,f," "); c[v]=c[v]" "f[6]} END{for(k in a) print k":"a[k]; for(k in c) print "copy "k":"c[k]}' $B | sort > $R/summary.txt
L=$R/check_tab.log
( echo "=== tests $(date -u +%T)"; timeout 60 $D/tab/cakegrad_gpu_conv1d_tests; echo "rc=$?" ) >> $L 2>&1 &
P1=$!
( echo "=== memcheck $(date -u +%T)"; timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 $D/tab/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*'; echo "rc=$?" ) > $R/memcheck.log 2>&1 &
P2=$!
( echo "=== racecheck $(date -u +%T)"; timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $D/tab/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*'; echo "rc=$?" ) > $R/racecheck.log 2>&1 &
P3=$!
wait $P1 $P2 $P3
grep -v forward $R/summary.txt | grep "16B"
grep copy $R/summary.txt
grep -hE "^===|^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY" $L $R/memcheck.log $R/racecheck.log | head -30
