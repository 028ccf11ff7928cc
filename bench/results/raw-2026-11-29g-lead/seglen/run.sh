#!/bin/bash
# lead (session 7): backward segment length A/B (alternating, two runs each) with a 100 ms clock log,
# the bias-order check, then the whole suite + memcheck + racecheck on the fastest two and ALL.
set -u
export PATH=$PATH:/usr/local/cuda/bin
D=.carry/lead
R=$OUT/c7b; mkdir -p $R
VARS="L136 L148 L160 L172 L184"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit --format=csv; } > $R/env.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 100 > $R/clocks.csv 2>&1 &
SMI=$!
B=$R/bench.txt
for v in $VARS $VARS $VARS; do
  echo "=== $v $(date -u +%T.%N)" >> $B; timeout 25 $D/$v/cakegrad_conv1d_bench >> $B 2>&1; echo "=== $v done rc=$? $(date -u +%T.%N)" >> $B
done
for v in L136 L172; do
  echo "=== order $v $(date -u +%T.%N)" >> $B; CAKEGRAD_BENCH_NO_BIAS_FIRST=1 timeout 25 $D/$v/cakegrad_conv1d_bench >> $B 2>&1; echo "=== order $v done rc=$? $(date -u +%T.%N)" >> $B
done
kill $SMI
awk -F'|' '/^=== /{split($0,f," "); v=f[2]; if(f[2]=="order") v="order-"f[3]; next} /\| (backward|forward)/ && /16 B/{for(i=2;i<=8;i++) gsub(/ /,"",$i); k=v" "$2" "$3"x"$4" "$5" "$6; a[k]=a[k]" "$8} /copy/{split($0,f," "); c[v]=c[v]" "f[6]} END{for(k in a) print k":"a[k]; for(k in c) print "copy "k":"c[k]}' $B | sort > $R/summary.txt
grep -v forward $R/summary.txt
grep forward $R/summary.txt | grep -E "^(L136|L172) "
TOP=$( (grep -v "^order\|^copy\|^L136" $R/summary.txt | grep " backward 32768x4096 bf16 yes:" | awk '{print $1, $5+$6+$7}' | sort -k2 -n | head -2 | cut -d' ' -f1; true) | sort -u)
echo "TOP: $TOP" | tee -a $R/summary.txt
PIDS=()
for v in $TOP; do
  ( L=$R/check_$v.log
    echo "=== tests $v $(date -u +%T)" >> $L; timeout 90 $D/$v/cakegrad_gpu_conv1d_tests >> $L 2>&1; echo "rc=$?" >> $L
    echo "=== memcheck $v $(date -u +%T)" >> $L; timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $D/$v/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*' >> $L 2>&1; echo "rc=$?" >> $L
    echo "=== racecheck $v $(date -u +%T)" >> $L; timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $D/$v/cakegrad_gpu_conv1d_tests --gtest_filter='*Sanitize*' >> $L 2>&1; echo "rc=$?" >> $L
    echo "=== end $v $(date -u +%T)" >> $L ) &
  PIDS+=($!)
done
wait "${PIDS[@]}"
for v in $TOP; do grep -E "^===|^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY" $R/check_$v.log | head -30; done
cd $OUT && tar czf lead_seglen.tgz c7b && rm -rf c7b
