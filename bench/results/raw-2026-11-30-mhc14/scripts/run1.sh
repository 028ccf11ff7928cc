#!/bin/bash
# mhc14 call 1: ncu of forward_prepare's with-U cluster kernel (main, -lineinfo; mhc13's candA)
# and forward_stats' kernel (main), T = 16384, C = 4096 (`cakegrad_mhc_bench --profile`).
D=${D:-.carry/mhc14}
L=$OUT/l; mkdir -p $L
export PATH=$PATH:/usr/local/cuda/bin
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; ncu --version; } > $L/env.txt 2>&1
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Chart --section SourceCounters --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis"
prof() {  # name variant launch-skip
  timeout 45 ncu --clock-control none --kernel-name regex:MhcFwdClusterKernel --launch-skip $3 --launch-count 1 \
    $SEC --import-source yes -f -o $L/$1 $D/$2/cakegrad_mhc_bench --profile > $L/run_$1.txt 2>&1
  echo "$1 rc=$?" >> $L/env.txt
  ncu -i $L/$1.ncu-rep --page details > $L/det_$1.txt 2>&1
  ncu -i $L/$1.ncu-rep --page source --csv --print-source sass > $L/sass_$1.csv 2>&1
}
prof prep_base base 2
prof stats_base base 3
prof prep_candA candA 2
ncu -i $L/prep_base.ncu-rep --page source --csv --print-source cuda > $L/cuda_prep_base.csv 2>&1
date -u >> $L/env.txt
tar czf $OUT/p1.tgz -C $OUT l
grep -E "rc=|Duration|DRAM Throughput|Memory Throughput" $L/env.txt $L/det_*.txt | head -40
