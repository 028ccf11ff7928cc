#!/bin/bash
# Lead, session 8: the forward with the backward's vector weight loader (one LoadChannelParams
# for both kernels; the backward's SASS is unchanged) against main, three runs each alternating,
# 500 ms idle before each measurement; then its whole conv1d suite.
set -u
D=.carry/c1dw
R=$OUT/c1dw; mkdir -p $R
date -u > $R/env.txt
B=$R/bench.txt
for v in base unif base unif base unif; do
  echo "=== $v $(date -u +%T.%N)" >> $B; CAKEGRAD_BENCH_REST_MS=500 timeout 40 $D/$v/cakegrad_conv1d_bench >> $B 2>&1; echo "=== $v done rc=$? $(date -u +%T.%N)" >> $B
done
awk -F'|' '/^=== /{split($0,f," "); v=f[2]; next} /\| (backward|forward)/{for(i=2;i<=8;i++) gsub(/ /,"",$i); k=v" "$2" "$3"x"$4" "$5" "$6" "$7; a[k]=a[k]" "$8} /copy/{split($0,f," "); c[v]=c[v]" "f[6]} END{for(k in a) print k":"a[k]; for(k in c) print "copy "k":"c[k]}' $B | sort > $R/summary.txt
timeout 60 $D/unif/cakegrad_gpu_conv1d_tests > $R/tests_unif.log 2>&1; echo "rc=$?" >> $R/tests_unif.log
grep -E "forward|bf16 yes 16B" $R/summary.txt
grep copy $R/summary.txt
grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=" $R/tests_unif.log
