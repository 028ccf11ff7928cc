#!/usr/bin/env bash
# Call 2 of the fourth forward session: variant sweep, tests, sanitizers, per-kernel times, ncu.
D=.carry/kda-fwd
cd "$(dirname "$0")/../.." || exit 1
export PATH=$PATH:/usr/local/cuda/bin
left() { [ $((285 - SECONDS)) -gt "$1" ]; }
L=$OUT/bench.txt
{ date -u; cat $D/SOURCE; nvidia-smi -L; } > $L 2>&1
for v in p0_mc0 p16_mc0 p48_mc0 p80_mc0 p144_mc0 p176_mc0 p176_mc1 p16_mc1; do
  echo "== $v: KDA_BENCH_FWD_ONLY=1 $D/bench_$v" >> $L
  KDA_BENCH_FWD_ONLY=1 timeout 25 $D/bench_$v >> $L 2>&1; echo "rc=$?" >> $L
done
echo "bench done $SECONDS s"
TF='KdaKernels.*:Shapes/KdaForwardAccuracy.*'
T=$OUT/tests.txt
for v in p176_mc1 p176_mc0 p16_mc0; do
  echo "== $(date -u) $D/tests_$v --gtest_filter='$TF'" >> $T
  timeout 45 $D/tests_$v --gtest_filter="$TF" >> $T 2>&1; echo "rc=$?" >> $T
done
echo "tests done $SECONDS s"
S=$OUT/sanitize.txt
SF='KdaKernels.SanitizePackedAndMalformedCuSeqlens:KdaKernels.ForwardChunkRecordsMatchFp64:Shapes/KdaForwardAccuracy.MatchesFp64Reference/B1_T777_H4:Shapes/KdaForwardAccuracy.MatchesFp64Reference/B1_T876_H4_docs16_i64'
if left 40; then
  echo "== $(date -u) compute-sanitizer --tool memcheck $D/tests_p176_mc1 --gtest_filter=$SF" >> $S
  timeout 40 compute-sanitizer --tool memcheck $D/tests_p176_mc1 --gtest_filter=$SF >> $S 2>&1; echo "rc=$?" >> $S
fi
echo "memcheck done $SECONDS s"
FU=$OUT/full_suite.txt
if left 60; then
  echo "== $(date -u) $D/tests_p176_mc1 (all tests)" >> $FU
  timeout $((285 - SECONDS - 50)) $D/tests_p176_mc1 >> $FU 2>&1; echo "rc=$?" >> $FU
fi
echo "full done $SECONDS s"
if left 45; then
  echo "== $(date -u) compute-sanitizer --tool racecheck $D/tests_p176_mc1 --gtest_filter=$SF" >> $S
  timeout $((285 - SECONDS - 15)) compute-sanitizer --tool racecheck $D/tests_p176_mc1 --gtest_filter=$SF >> $S 2>&1; echo "rc=$?" >> $S
fi
echo "racecheck done $SECONDS s"
K=$OUT/kernels.txt
for v in p176_mc1 p176_mc0; do
  left 20 || break
  echo "== $v per-kernel gpu__time_duration (ns)" >> $K
  KDA_BENCH_FWD_ONLY=1 timeout 20 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:KdaChunk --csv $D/bench_$v 2>&1 | grep -v '^==PROF' | awk -F'","' '{print $5, $9, $(NF)}' | sed 's/"//g' >> $K
done
echo "kernels done $SECONDS s"
if left 20; then
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=0 timeout 20 ncu --clock-control none --set full --import-source no -k regex:KdaChunkPrep --launch-skip 3 -c 1 -o /tmp/prep176 $D/bench_p176_mc0 > /tmp/ncu176.log 2>&1
  ncu -i /tmp/prep176.ncu-rep --page details > $OUT/ncu_details_p176.txt 2>&1
  ncu -i /tmp/prep176.ncu-rep --page source --csv --print-source sass > $OUT/ncu_src_p176.csv 2>&1
fi
echo "all done $SECONDS s"
