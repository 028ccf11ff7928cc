#!/bin/bash
# mHC fourth session, device call 1: variants against HEAD (base), tests, ncu, sanitizers.
# exp/ = 94de13c + mhc_call1_experiment.patch (variants selected by environment variables).
D=.carry/mhc
mkdir -p $OUT
L=$OUT/bench.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $L
cp $D/SOURCE $OUT/SOURCE.txt
b() {  # name, env...
  local n=$1; shift
  local bin=$D/exp; [ "$n" = base ] && bin=$D/base
  echo "=== bench $n $* $(date -u +%T)" >> $L
  env "$@" timeout 15 $bin/cakegrad_mhc_bench >> $L 2>&1; echo "rc=$?" >> $L
}
for rep in 1 2; do
  b base
  b exp0
  b B3P MHC_EXP_BWD=b3 MHC_EXP_FWD=p
  b B4PX MHC_EXP_BWD=b4 MHC_EXP_FWD=px
  b E3P1 MHC_EXP_BWD=e3 MHC_EXP_FWD=p MHC_EXP_FWD_TILES=1
  b E4PX1 MHC_EXP_BWD=e4 MHC_EXP_FWD=px MHC_EXP_FWD_TILES=1
done
grep -E "^===|_finish \| 16384|_stats \| 16384|_prepare \| 16384|prepare\+finish \| 16384|stats \| 4096" $L | grep -v "forward_finish\|backward_prepare"
t() {  # name, env...
  local n=$1; shift
  ( env "$@" timeout 110 $D/exp/cakegrad_gpu_mhc_tests > /tmp/t_$n.txt 2>&1; echo "rc=$?" >> /tmp/t_$n.txt ) &
}
t B3P MHC_EXP_BWD=b3 MHC_EXP_FWD=p
t B4PX MHC_EXP_BWD=b4 MHC_EXP_FWD=px
t E3P1 MHC_EXP_BWD=e3 MHC_EXP_FWD=p MHC_EXP_FWD_TILES=1
t E4PX1 MHC_EXP_BWD=e4 MHC_EXP_FWD=px MHC_EXP_FWD_TILES=1
wait
for n in B3P B4PX E3P1 E4PX1; do echo "=== tests $n" >> $OUT/tests.txt; cat /tmp/t_$n.txt >> $OUT/tests.txt; done
grep -E "^===|PASSED|FAILED|rc=" $OUT/tests.txt
N=$OUT/ncu.txt
echo "=== ncu B3P" >> $N
MHC_EXP_BWD=b3 MHC_EXP_FWD=p timeout 35 ncu --clock-control none -k regex:'MhcBwdColumns|MhcFwdStats|MhcFnSplit|MhcBwdToken' --section SpeedOfLight $D/exp/cakegrad_mhc_bench --profile >> $N 2>&1
echo "=== ncu E4PX" >> $N
MHC_EXP_BWD=e4 MHC_EXP_FWD=px timeout 35 ncu --clock-control none -k regex:'MhcBwdColumns|MhcFwdStats' --section SpeedOfLight $D/exp/cakegrad_mhc_bench --profile >> $N 2>&1
grep -E "^===|Mhc|Duration|DRAM Through|Compute \(SM\)|L1/TEX Cache" $N | cut -c1-110
s() {  # name, tool, env...
  local n=$1 tool=$2; shift 2
  ( env "$@" timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 $D/exp/cakegrad_gpu_mhc_tests \
      --gtest_filter='*Sanitize*:*Cancellation*T96*' > /tmp/s_${n}_$tool.txt 2>&1; echo "rc=$?" >> /tmp/s_${n}_$tool.txt ) &
}
s B3P memcheck MHC_EXP_BWD=b3 MHC_EXP_FWD=p
s B3P racecheck MHC_EXP_BWD=b3 MHC_EXP_FWD=p
s E4PX memcheck MHC_EXP_BWD=e4 MHC_EXP_FWD=px
s E4PX racecheck MHC_EXP_BWD=e4 MHC_EXP_FWD=px
s E4PX synccheck MHC_EXP_BWD=e4 MHC_EXP_FWD=px
wait
for f in /tmp/s_*.txt; do echo "=== $f" >> $OUT/sanitize.txt; cat $f >> $OUT/sanitize.txt; done
grep -E "^===|SUMMARY|rc=" $OUT/sanitize.txt
date -u
