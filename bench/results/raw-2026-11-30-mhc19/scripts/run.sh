#!/bin/bash
# mhc19: one device call, from the repo root:
#   run(command="LIMIT=215 bash .carry/mhc19/run.sh", carry=[".carry/mhc19"], timeout_s=240)
# .carry/mhc19/<v>/: cakegrad_mhc_bench, cakegrad_gpu_mhc_tests, fhash (fhash19; BUILT.txt).
#   base = main's mHC kernels; candA = coefficients in the cluster kernel (9th warp without U,
#   last U warp with U); candB = candA with 4 auxiliary warps without U (setmaxnreg 224 / 56).
# 1. fhash of all: iters-20 lines must equal the recorded ones (since mhc14), every line base's.
# 2. tools/gpu/ab_bench.sh: benches alternating, 3 rounds; suite + memcheck + racecheck on
#    *Sanitize* of the candidates whose fingerprints match.
# 3. memcheck + racecheck of fhash at T = 1000 (4-5 stages a cluster: the slot reuse) per cand.
# 4. iters 64 vs 20 timing (fhash T iters reps) of all; 5. ncu of the cluster kernels; 6. T sweep.
T0=$(date +%s)
D0=.carry/mhc19 D=/tmp/mhc19v L=$OUT/l
mkdir -p $D $L
S=$L/summary.txt
export PATH=$PATH:/usr/local/cuda/bin
LIMIT=${LIMIT:-200}
VS=${VS:-"base candA candB"}
el() { echo $(($(date +%s) - T0)); }
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
diff -q <(head -8 $D0/expected_fhash.txt) <(head -8 $L/h_base.txt) > /dev/null && REC=yes
echo "base iters-20 lines == recorded (mhc14..18): $REC (t=$(el) s)" >> $S
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
awk -F: '/^[a-zA-Z0-9]+ [a-z_+]+ T=/ { n = split($2, r, " "); s = 0; for (i = 1; i <= n; ++i) s += r[i];
  if (n) printf "%s mean %.4f (n=%d)\n", $1, s / n, n }' $OUT/ab/summary.txt | sort > $L/means.txt
{ echo "-- means (ms)"; cat $L/means.txt; } >> $S
mv $OUT/ab $L/ab
# Sanitizers on a shape with slot reuse (T = 1000: 32 stages over 7 clusters).
pids=()
for v in $CHECK; do
  for tool in memcheck racecheck; do
    (timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $D/$v/fhash 1000 20 \
      > $L/fh_${tool}_$v.log 2>&1; echo "rc=$?" >> $L/fh_${tool}_$v.log) &
    pids+=($!)
  done
done
[ ${#pids[@]} -eq 0 ] || wait "${pids[@]}"
for v in $CHECK; do for tool in memcheck racecheck; do
  echo "fhash-1000 $tool $v: $(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|^rc=" $L/fh_${tool}_$v.log | tr '\n' ' ')" >> $S
done; done
echo "(t=$(el) s)" >> $S
# iters 64 and 20, T = 4096 and 16384, 30 calls each.
for T in 16384 4096; do for it in 64 20; do for v in $VS; do
  [ $(el) -lt $((LIMIT - 30)) ] || continue
  timeout 20 $D/$v/fhash $T $it 30 2>&1 | grep median | sed "s/^/$v /" >> $S
done; done; done
echo "(t=$(el) s)" >> $S
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread
for v in $VS; do
  [ $(el) -lt $((LIMIT - 35)) ] || { echo "ncu $v skipped (t=$(el) s)" >> $S; continue; }
  timeout 30 ncu --clock-control none --kernel-name regex:MhcF --launch-count 12 --metrics $M \
    --csv $D/$v/cakegrad_mhc_bench --profile > $L/ncu16k_$v.csv 2> $L/ncu16k_$v.err
  echo "ncu16k $v rc=$? (t=$(el) s)" >> $S
  grep -E "Cluster|Coef" $L/ncu16k_$v.csv | grep gpu__time_duration | awk -F'","' '{print $5, $(NF-2), $NF}' | cut -c1-200 | head -8 | sed "s/^/$v /" >> $S
done
for v in $VS; do
  [ $(el) -lt $((LIMIT - 20)) ] || { echo "sweep $v skipped (t=$(el) s)" >> $S; continue; }
  MHC_BENCH_T=1024,4096,16384,65536 timeout 20 $D/$v/cakegrad_mhc_bench > $L/sweep_$v.txt 2>&1
  echo "sweep $v rc=$? (t=$(el) s)" >> $S
  grep -E "copy|forward_(stats|prepare)" $L/sweep_$v.txt | sed "s/^/$v /" >> $S
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $S 2>&1
echo "end t=$(el) s" >> $S
date -u >> $S
tar czf $OUT/logs.tgz -C $OUT l
cp $S $OUT/summary.txt
grep -v "T=[0-9]*: " $S | grep -v "backward\|forward_finish" | tail -80
