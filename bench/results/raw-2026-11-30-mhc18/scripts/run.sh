#!/bin/bash
# mhc18: one device call, from the repo root:
#   run(command="bash .carry/mhc18/run.sh", carry=[".carry/mhc18"], timeout_s=...)
# .carry/mhc18/<v>/: cakegrad_mhc_bench, cakegrad_gpu_mhc_tests, fhash (BUILT.txt says what).
#   base = main's mHC kernels (mhc16's cand build), c1 = no split kernel (fragments split in the
#   cluster kernel), c2 = one-thread-a-token coefficient kernel, c12 = both.
# 1. fhash of all (stats of forward_stats, stats and U of forward_prepare; garbage-filled outputs
#    and workspace): each candidate must print base's lines, base the recorded ones.
# 2. tools/gpu/ab_bench.sh: benches alternating, ROUNDS rounds; suite + memcheck + racecheck of the
#    candidates whose fingerprints match.
# 3. T sweep (1024 .. 65536) of base and c12; 4. ncu of the forward kernels (T = 4096, 16384)
#    of base and c12; 5. nsys timeline (if nsys exists) of base and c12 at T = 4096, 16384.
T0=$(date +%s)
D0=.carry/mhc18 D=/tmp/mhc18v L=$OUT/l
mkdir -p $D $L
S=$L/summary.txt
export PATH=$PATH:/usr/local/cuda/bin
LIMIT=${LIMIT:-200}
VS=${VS:-"base c1 c2 c12"}
el() { echo $(($(date +%s) - T0)); }
# T sweep of base and c12 (one round per call of sweep).
sweep() {
  local r=$1
  for v in base c12; do
    [ $(el) -lt $((LIMIT - 25)) ] || { echo "sweep $v $r skipped (t=$(el) s)" >> $S; continue; }
    MHC_BENCH_T=1024,2048,4096,8192,16384,32768,65536 timeout 25 $D/$v/cakegrad_mhc_bench \
      > $L/sweep_${v}_$r.txt 2>&1
    echo "sweep $v $r rc=$? (t=$(el) s)" >> $S
    grep -E "copy|forward_(stats|prepare)" $L/sweep_${v}_$r.txt | sed "s/^/$v $r /" >> $S
  done
}
for v in $VS; do cp -r $D0/$v $D/; done
chmod +x $D/*/*
{ date -u; cat $D0/BUILT.txt
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu \
    --format=csv; } > $S 2>&1
for v in $VS; do
  (timeout 60 $D/$v/fhash > $L/h_$v.txt 2>&1; echo "rc=$?" >> $L/h_$v.txt) &
done
wait
REC=no
diff -q $D0/expected_fhash.txt $L/h_base.txt > /dev/null && REC=yes
echo "base == recorded (mhc14..16): $REC (t=$(el) s)" >> $S
cat $L/h_base.txt >> $S
CHECK=""
for v in $VS; do
  [ $v = base ] && continue
  if grep -q "^rc=0$" $L/h_$v.txt && diff -q $L/h_base.txt $L/h_$v.txt > /dev/null; then
    CHECK="$CHECK $v"; echo "fingerprint $v == base: yes" >> $S
  else
    echo "fingerprint $v == base: NO" >> $S; diff $L/h_base.txt $L/h_$v.txt | head -20 >> $S
  fi
done
BENCH_TIMEOUT=30 TEST_TIMEOUT=120 bash tools/gpu/ab_bench.sh $D mhc "$VS" ${ROUNDS:-3} \
  "$CHECK" > $L/ab_stdout.txt 2>&1
echo "ab rc=$? (t=$(el) s)" >> $S
cat $L/ab_stdout.txt >> $S
awk -F: '/^[a-z0-9]+ [a-z_+]+ T=/ { n = split($2, r, " "); s = 0; for (i = 1; i <= n; ++i) s += r[i];
  if (n) printf "%s mean %.4f (n=%d)\n", $1, s / n, n }' $OUT/ab/summary.txt | sort > $L/means.txt
{ echo "-- means (ms)"; cat $L/means.txt; } >> $S
mv $OUT/ab $L/ab
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
M=$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,sm__cycles_active.max
M=$M,gpc__cycles_elapsed.max,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active
for v in base c12; do
  [ $(el) -lt $((LIMIT - 40)) ] || { echo "ncu $v skipped (t=$(el) s)" >> $S; continue; }
  # Profile mode (T = 16384): stats x2 (the sets), prepare, stats, finish.
  timeout 40 ncu --clock-control none --kernel-name regex:MhcF --launch-count 12 --metrics $M \
    --csv $D/$v/cakegrad_mhc_bench --profile > $L/ncu16k_$v.csv 2> $L/ncu16k_$v.err
  echo "ncu16k $v rc=$? (t=$(el) s)" >> $S
  MHC_BENCH_T=4096 timeout 40 ncu --clock-control none --kernel-name regex:MhcF \
    --launch-count 24 --metrics $M --csv $D/$v/cakegrad_mhc_bench > $L/ncu4k_$v.csv 2> $L/ncu4k_$v.err
  echo "ncu4k $v rc=$? (t=$(el) s)" >> $S
done
sweep 1
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}" >> $S
if [ -n "$NSYS" ]; then
  for v in base c12; do
    [ $(el) -lt $((LIMIT - 30)) ] || { echo "nsys $v skipped (t=$(el) s)" >> $S; continue; }
    MHC_BENCH_T=4096,16384 timeout 40 $NSYS profile --trace=cuda --sample=none --cpuctxsw=none \
      -o /tmp/nsys_$v $D/$v/cakegrad_mhc_bench > $L/nsys_$v.log 2>&1
    timeout 30 $NSYS stats -q -r cuda_gpu_trace -f csv -o /tmp/tr_$v /tmp/nsys_$v.nsys-rep \
      >> $L/nsys_$v.log 2>&1
    grep -E "Mhc|Name" /tmp/tr_$v*.csv | cut -c1-400 | gzip > $L/trace_$v.csv.gz
    echo "nsys $v rc=$? (t=$(el) s)" >> $S
  done
fi
sweep 2
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $S 2>&1
echo "end t=$(el) s" >> $S
date -u >> $S
tar czf $OUT/logs.tgz -C $OUT l
cp $S $OUT/summary.txt
grep -v "T=[0-9]*: " $S | grep -v "backward\|forward_finish" | tail -60
