#!/usr/bin/env bash
# kda80: why a scan step takes ~9 us (ncu, kda79: 257 us for 28 steps at (1, 8192, 1)) where its
# FP64 products need ~1 us: the scan kernel's warp states and per-SASS-line stall samples at
# (1, 32768, 1) (74 steps), main 1294ab9 (= kda79's seg4).
set -uo pipefail
C=.carry/kda79
O=${OUT:-/tmp}/kda80
mkdir -p "$O"
B=$C/seg4/cakegrad_kda_bench
KDA_BENCH_CASES=1 KDA_BENCH_H=1 timeout 200 ncu --section WarpStateStats --section SchedulerStats \
  --section Occupancy --section LaunchStats --section SourceCounters --section MemoryWorkloadAnalysis \
  --section SpeedOfLight --import-source no -k regex:"KdaSegmentScan" -c 1 -o $O/scan $B > $O/prof_log.txt 2>&1
ncu --import $O/scan.ncu-rep --print-details all > $O/scan_details.txt 2>&1
ncu --import $O/scan.ncu-rep --page source --csv --print-source sass > $O/scan_sass.csv 2>&1
grep -E "Duration|Warp Cycles|Issued Warp|Eligible|Active Warps|No Eligible|Stall|Throughput|Hit Rate|Memory \[" $O/scan_details.txt | head -50
gzip -f $O/scan_sass.csv; rm -f $O/scan.ncu-rep
