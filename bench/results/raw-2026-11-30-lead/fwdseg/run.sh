#!/bin/bash
# Lead, session 8: forward segment length A/B: F64 (main after the table change), F68 (71 steps
# in a 72-step ring walk instead of 67), F128; two runs each alternating, 500 ms idle before each
# measurement; then the whole conv1d suite of F68 and F128.
set -u
export PATH=$PATH:/usr/local/cuda/bin
D=.carry/c1df
R=$OUT/c1df; mkdir -p $R
date -u > $R/env.txt
B=$R/bench.txt
for v in F64 F68 F128 F64 F68 F128; do
  echo "=== $v $(date -u +%T.%N)" >> $B; CAKEGRAD_BENCH_REST_MS=500 timeout 40 $D/$v/cakegrad_conv1d_bench >> $B 2>&1; echo "=== $v done rc=$? $(date -u +%T.%N)" >> $B
done
awk -F'|' '/^=== /{split($0,f," "); v=f[2]; next} /\| (backward|forward)/{for(i=2;i<=8;i++) gsub(/ /,"",$i); k=v" "$2" "$3"x"$4" "$5" "$6" "$7; a[k]=a[k]" "$8} /copy/{split($0,f," "); c[v]=c[v]" "f[6]} END{for(k in a) print k":"a[k]; for(k in c) print "copy "k":"c[k]}' $B | sort > $R/summary.txt
for v in F68 F128; do ( timeout 60 $D/$v/cakegrad_gpu_conv1d_tests > $R/tests_$v.log 2>&1; echo "rc=$?" >> $R/tests_$v.log ) & done
wait
grep -E "forward|bf16 yes 16B" $R/summary.txt
grep copy $R/summary.txt
grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=" $R/tests_*.log
