#!/bin/bash
# mhc16: the swizzled X staging (cand) against main (base), one device call, from the repo root:
#   run(command="LIMIT=200 bash .carry/mhc16/run.sh", carry=[".carry/mhc16"], timeout_s=210)
# .carry/mhc16/<v>/ holds cakegrad_mhc_bench, cakegrad_gpu_mhc_tests and fhash (stripped; built by
# bench/results/raw-2026-11-30-mhc16/scripts/build.sh, SOURCE.txt says what each is).
# 1. fhash of both (mhc12's fingerprint: stats of forward_stats, stats and U of forward_prepare,
#    garbage-filled outputs and workspace, T = 1 .. 65536): cand must print base's lines, and
#    base the lines recorded since mhc14 (expected_fhash.txt); else stop after cand's suite.
# 2. tools/gpu/ab_bench.sh: both benches alternating, ROUNDS (3) rounds; then cand's whole suite,
#    memcheck and racecheck on *Sanitize*.
# 3. if time is left (LIMIT, s): ncu of both cluster kernels of base and cand (T = 16384): duration,
#    DRAM, shared wavefronts and bank conflicts (the change should halve the multiply's).
# Everything goes to $OUT/logs.tgz and $OUT/summary.txt.
T0=$(date +%s)
D0=.carry/mhc16 D=/tmp/mhc16v L=$OUT/l
mkdir -p $D $L
S=$L/summary.txt
export PATH=$PATH:/usr/local/cuda/bin
LIMIT=${LIMIT:-200}
el() { echo $(($(date +%s) - T0)); }
cp -r $D0/base $D0/cand $D
chmod +x $D/*/*
{ date -u; cat $D0/SOURCE.txt $D0/BUILT.txt
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu \
    --format=csv; } > $S 2>&1
for v in base cand; do
  (timeout 40 $D/$v/fhash > $L/h_$v.txt 2>&1; echo "rc=$?" >> $L/h_$v.txt) &
done
wait
OK=no
grep -q "^rc=0$" $L/h_cand.txt && diff -q $L/h_base.txt $L/h_cand.txt > /dev/null && OK=yes
REC=no
diff -q $D0/expected_fhash.txt $L/h_base.txt > /dev/null && REC=yes
{ echo "fingerprint cand == base: $OK; base == recorded (mhc14/mhc15): $REC (t=$(el) s)"
  cat $L/h_base.txt; echo "-- diff base cand"; diff $L/h_base.txt $L/h_cand.txt | head -20; } >> $S
if [ $OK = yes ]; then
  BENCH_TIMEOUT=20 TEST_TIMEOUT=90 bash tools/gpu/ab_bench.sh $D mhc "base cand" ${ROUNDS:-3} \
    "cand" > $L/ab_stdout.txt 2>&1
  cat $L/ab_stdout.txt >> $S
  awk -F: '/^[a-z0-9]+ [a-z_+]+ T=/ { n = split($2, r, " "); s = 0; for (i = 1; i <= n; ++i) s += r[i];
    if (n) printf "%s mean %.4f (n=%d)\n", $1, s / n, n }' $OUT/ab/summary.txt | sort > $L/means.txt
  { echo "-- means (ms)"; cat $L/means.txt; } >> $S
  mv $OUT/ab $L/ab
else
  echo "fingerprints differ: cand's suite only, no bench" >> $S
  timeout 90 $D/cand/cakegrad_gpu_mhc_tests > $L/tests_cand.log 2>&1
  echo "rc=$?" >> $L/tests_cand.log
  grep -E "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=" $L/tests_cand.log | head -30 >> $S
fi
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_shared_ld.sum
for v in base cand; do
  [ $(el) -lt $((LIMIT - 40)) ] || { echo "ncu $v skipped (t=$(el) s)" >> $S; continue; }
  # Profile mode: cluster launches 0, 1 = forward_stats of the two input sets, 2 = forward_prepare
  # (with U), 3 = forward_stats (without U).
  timeout 40 ncu --clock-control none --kernel-name regex:MhcFwdClusterKernel --launch-skip 2 \
    --launch-count 2 --metrics $M $D/$v/cakegrad_mhc_bench --profile > $L/ncu_$v.txt 2>&1
  echo "ncu $v rc=$? (t=$(el) s)" >> $S
  grep -E "MhcFwdClusterKernel|gpu__time|dram__|l1tex__|smsp__" $L/ncu_$v.txt |
    sed 's/(CUtensorMap_st.*//; s/  */ /g' >> $S
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $S 2>&1
echo "end t=$(el) s" >> $S
date -u >> $S
tar czf $OUT/logs.tgz -C $OUT l
cp $S $OUT/summary.txt
grep -v "T=[0-9]*: " $S | grep -v "backward\|forward_finish" | tail -80
