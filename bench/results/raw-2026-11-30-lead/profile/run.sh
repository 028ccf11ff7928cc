#!/bin/bash
# Lead, session 8: the conv1d bench with a rest before each measurement (default) and in the
# power-limited steady state (CAKEGRAD_BENCH_REST_MS=0 CAKEGRAD_BENCH_SUSTAIN_MS=2000), with a
# 50 ms power/clock log; then ncu of one backward main kernel ("bf16", 32768 x 4096, bias, paired
# route: the bench's first backward) with SASS-level source counters, and of one reduce kernel.
set -u
export PATH=$PATH:/usr/local/cuda/bin
D=.carry/c1dp
R=$OUT/c1dp; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv; } > $R/env.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,power.draw.instant,temperature.gpu --format=csv -lms 50 > $R/clocks.csv 2>&1 &
SMI=$!
B=$R/bench.txt
for mode in rest sustained rest; do
  echo "=== $mode $(date -u +%T.%N)" >> $B
  if [ $mode = rest ]; then timeout 60 $D/cakegrad_conv1d_bench >> $B 2>&1
  else CAKEGRAD_BENCH_REST_MS=0 CAKEGRAD_BENCH_SUSTAIN_MS=2000 timeout 60 $D/cakegrad_conv1d_bench >> $B 2>&1; fi
  echo "=== $mode done rc=$? $(date -u +%T.%N)" >> $B
done
kill $SMI
echo "=== ncu main $(date -u +%T)" >> $R/ncu.log
CAKEGRAD_BENCH_REST_MS=0 CAKEGRAD_BENCH_SUSTAIN_MS=0 timeout 90 ncu --clock-control none -k regex:Conv1dBwdMainKernel --launch-count 1 --set full --import-source no -o $R/bwd_main $D/cakegrad_conv1d_bench >> $R/ncu.log 2>&1
echo "rc=$?" >> $R/ncu.log
CAKEGRAD_BENCH_REST_MS=0 CAKEGRAD_BENCH_SUSTAIN_MS=0 timeout 40 ncu --clock-control none -k regex:Conv1dBwdReduceKernel --launch-count 2 --section SpeedOfLight --section LaunchStats -o $R/bwd_reduce $D/cakegrad_conv1d_bench >> $R/ncu.log 2>&1
echo "rc=$?" >> $R/ncu.log
ncu -i $R/bwd_main.ncu-rep --page details > $R/bwd_main_details.txt 2>&1
ncu -i $R/bwd_main.ncu-rep --page source --print-source sass --csv > $R/bwd_main_sass.csv 2>&1
ncu -i $R/bwd_reduce.ncu-rep --page details > $R/bwd_reduce_details.txt 2>&1
gzip -f $R/bwd_main_sass.csv
cd $OUT && tar czf c1dp.tgz c1dp && rm -rf c1dp/*.ncu-rep
grep -E "^===|copy|each measurement|backward .*16 B|forward" $B
grep -E "Duration|DRAM Throughput|Issue Slots|Executed Ipc A|Memory Throughput" $R/bwd_main_details.txt | head -12
grep -E "Duration" $R/bwd_reduce_details.txt
