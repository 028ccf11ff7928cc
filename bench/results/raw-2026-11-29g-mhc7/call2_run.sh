#!/bin/bash
# mHC helper mhc7, device call 2 (last): backward_finish variants A..E against main f19a170 (base).
# Every variant claims bitwise-identical outputs to base: checked by hash first; then the bench
# (alternating, twice); then the whole suite + memcheck + racecheck on the fastest hash-clean
# variant and on the fastest of A/B/C (no mbarrier change) as a fallback.
D=.carry/mhc7
mkdir -p $OUT
S=$OUT/summary.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $S
V="A B C D E F"
H=$OUT/hash.txt
timeout 20 $D/hash_base > /tmp/h_base.txt 2>&1; echo "rc=$?" >> /tmp/h_base.txt
for v in $V; do ( timeout 25 $D/hash_$v > /tmp/h_$v.txt 2>&1; echo "rc=$?" >> /tmp/h_$v.txt ) & done; wait
OKV=""
for v in base $V; do echo "=== hash $v" >> $H; cat /tmp/h_$v.txt >> $H
  if [ $v != base ] && diff -q <(grep -v rc= /tmp/h_base.txt) <(grep -v rc= /tmp/h_$v.txt) >/dev/null && grep -q rc=0 /tmp/h_$v.txt; then OKV="$OKV $v"; fi; done
echo "hash-identical to base:$OKV" | tee -a $S
L=$OUT/bench.txt
for rep in 1 2; do for v in base $V; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $L
  MHC_BENCH_T=4096,16384 timeout 20 $D/bench_$v >> $L 2>&1; echo "rc=$?" >> $L
done; done
awk '/^=== bench/{split($0, w, " "); v=w[3]} /backward_finish \| 16384/{s[v]+=$4; n[v]++} /backward_finish \| 4096/{s4[v]+=$4; n4[v]++}
  END{for (v in s) printf "%s %.4f %.4f\n", v, s[v]/n[v], s4[v]/n4[v]}' FS='|' $L | sort -k2 -n > $OUT/means.txt
cat $OUT/means.txt | tee -a $S
BEST=$(awk -v ok="$OKV" 'BEGIN{split(ok,a," "); for(i in a) m[a[i]]=1} ($1 in m){print $1; exit}' $OUT/means.txt)
SAFE=$(awk -v ok="$OKV" 'BEGIN{split(ok,a," "); for(i in a) if (a[i] ~ /^[ABC]$/) m[a[i]]=1} ($1 in m){print $1; exit}' $OUT/means.txt)
T="$BEST"; [ -n "$SAFE" ] && [ "$SAFE" != "$BEST" ] && T="$T $SAFE"
echo "full suite + sanitizers on: $T" | tee -a $S
for v in $T; do
  ( timeout 85 $D/tests_$v > /tmp/t_$v.txt 2>&1; echo "rc=$?" >> /tmp/t_$v.txt ) &
  for tool in memcheck racecheck; do
    ( timeout 85 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_$v \
        --gtest_filter='*Sanitize*' > /tmp/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> /tmp/s_${v}_$tool.txt ) &
  done
done
N=$OUT/ncu.txt
for v in A $BEST; do
  echo "=== ncu $v (tests running concurrently) $(date -u +%T)" >> $N
  timeout 25 ncu --clock-control none -k regex:MhcBwd[TCR] --launch-count 3 --section SpeedOfLight \
    --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis_Tables \
    $D/bench_$v --profile >> $N 2>&1; echo "rc=$?" >> $N
done
wait
for v in $T; do echo "=== tests $v" >> $OUT/tests.txt; cat /tmp/t_$v.txt >> $OUT/tests.txt;
  for tool in memcheck racecheck; do echo "=== $v $tool" >> $OUT/sanitize.txt; cat /tmp/s_${v}_$tool.txt >> $OUT/sanitize.txt; done; done
grep -E "^===|PASSED|FAILED|rc=|tests ran" $OUT/tests.txt | cut -c1-160 | tee -a $S
grep -E "^===|SUMMARY|rc=" $OUT/sanitize.txt | tee -a $S
grep -E "^===|copy|backward_finish \| |rc=[1-9]" $L
grep -E "^===|  [a-zA-Z_ ]*Mhc|Duration|DRAM Through|Compute \(SM\)|L1/TEX Cache Throughput|L2 Cache Throughput|Registers Per|Achieved Occ|Theoretical Occ|rc=" $N | cut -c1-130 | head -60
date -u | tee -a $S
