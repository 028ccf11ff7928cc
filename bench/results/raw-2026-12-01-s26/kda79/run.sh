#!/usr/bin/env bash
# kda79: the segmented sequential backward, fourth form (seg4, working tree): kda78's seg3 plus
# the scans' map tiles four stages deep (three in flight) and the segment length chosen for whole
# waves of the backward's resident clusters (cudaOccupancyMaxActiveClusters). Tests, memcheck,
# racecheck on a multi-segment draw, per-kernel times, the row pass's stall profile, the bench
# (base = main 0a8f958 at H = 1 for reference).
set -uo pipefail
C=.carry/kda79
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp}/kda79
mkdir -p "$O"
T=$C/seg4/cakegrad_gpu_kda_tests
B=$C/seg4/cakegrad_kda_bench
echo "== seg4 tests"
timeout 300 $T --gtest_filter='*KdaKernelsAccuracy*:KdaKernels.*' --gtest_repeat=2 > "$O/tests_seg4.txt" 2>&1
echo "rc=$?"
grep -E "^\[ kda \].*(dA_log|ddt_bias|dinitial)" "$O/tests_seg4.txt" | awk '{print $5, $7}' | sort -k2 -g | tail -4
grep -E "FAILED|^\[  PASSED" "$O/tests_seg4.txt" | sort | uniq -c
echo "== seg4 memcheck"
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='KdaKernels.Sanitize*:KdaKernels.BitwiseDeterministic*:*KdaKernelsAccuracy*docs16_i32*:*KdaKernelsAccuracy*B2_T65_H1:*KdaKernelsAccuracy*fastdecay*' > "$O/memcheck.txt" 2>&1
echo "rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$O/memcheck.txt" | tail -3
echo "== seg4 racecheck (fast decay: 2 documents of 4 segments)"
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='*KdaKernelsAccuracy*fastdecay*' > "$O/racecheck.txt" 2>&1
echo "rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$O/racecheck.txt" | tail -3
echo "== ncu per-kernel times, seg4"
for spec in "0 1" "1 1" "1 2"; do
  set -- $spec
  KDA_BENCH_CASES=$1 KDA_BENCH_H=$2 timeout 120 ncu --metrics gpu__time_duration.sum \
    -k regex:"KdaSegment|KdaRowPass|KdaBackwardKernel|KdaParamReduce" -c 6 $B > "$O/times_$1_$2.txt" 2>&1
  echo "-- case $1 H=$2"
  grep -E "Kda[A-Za-z]*Kernel|gpu__time_duration" "$O/times_$1_$2.txt" | grep -v PROF | sed 's/(cakegrad.*//' | paste - - | awk '{print $1, $2, $(NF-1), $NF}'
done
echo "== ncu profile of the B/M row pass, case 0 H=1"
KDA_BENCH_CASES=0 KDA_BENCH_H=1 timeout 200 ncu --section WarpStateStats --section SchedulerStats \
  --section Occupancy --section LaunchStats --section SourceCounters --section ComputeWorkloadAnalysis \
  --import-source no -k regex:"KdaRowPassKernel" -c 1 -o $O/bm $B > $O/prof_log.txt 2>&1
ncu --import $O/bm.ncu-rep --print-details all > $O/bm_details.txt 2>&1
ncu --import $O/bm.ncu-rep --page source --csv --print-source sass > $O/bm_sass.csv 2>&1
grep -E "Warp Cycles|Issued Warp|Eligible|Active Warps|No Eligible|Stall|stall|Theoretical Occ|Achieved Occ|Registers|Pipe" $O/bm_details.txt | head -40
gzip -f $O/bm_sass.csv; rm -f $O/bm.ncu-rep
for v in base seg4; do
  for h in 1 2 3; do
    [ $v = base ] && [ $h != 1 ] && continue
    echo "== $v H=$h"
    KDA_BENCH_CASES=012 KDA_BENCH_H=$h timeout 150 $C/$v/cakegrad_kda_bench 2>&1 | tee -a "$O/bench_$v.txt" | grep -E "bwd  median"
  done
done
