#!/bin/bash
# mhc15: forward_prepare candidates against main (base), one device call. .carry/mhc15/<v>.tar.xz
# holds <v>/{cakegrad_mhc_bench,cakegrad_gpu_mhc_tests,fhash} (stripped); SOURCE.txt says what each is.
# 1. fhash per build (parallel, 30 s timeout); only candidates with base's exact output go on.
# 2. tools/gpu/ab_bench.sh: all benches alternating, 5 rounds.
# 3. suite + memcheck + racecheck on the NBEST fastest at forward_prepare T = 16384 (below base).
# 4. ncu of the fastest one's with-U kernel (T = 16384), if time is left.
T0=$(date +%s)
D0=.carry/mhc15; D=/tmp/mhc15v; mkdir -p $D
L=$OUT/l; mkdir -p $L
S=$L/summary.txt
export PATH=$PATH:/usr/local/cuda/bin
V=${V:-"r2 r2b r4 o2 o2b o4 dsm d2"}
for v in base $V; do tar xJf $D0/$v.tar.xz -C $D; done
{ date -u; cat $D0/SOURCE.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } > $S 2>&1
for v in base $V; do
  (timeout 30 $D/$v/fhash > $L/h_$v.txt 2>&1; echo "rc=$?" >> $L/h_$v.txt) &
done
wait
OKV=""
for v in $V; do
  grep -q "^rc=0$" $L/h_$v.txt && diff -q $L/h_base.txt $L/h_$v.txt > /dev/null && OKV="$OKV $v"
done
{ echo "fingerprint identical to base:$OKV (t=$(( $(date +%s) - T0 )) s)"; cat $L/h_base.txt
  for v in $V; do echo "-- diff base $v"; diff $L/h_base.txt $L/h_$v.txt | head -6; done; } >> $S
OKV=${OKV# }
if [ -n "$OKV" ]; then
  BENCH_TIMEOUT=20 bash tools/gpu/ab_bench.sh $D mhc "base $OKV" ${ROUNDS:-5} "" > $L/ab_stdout.txt 2>&1
  cat $L/ab_stdout.txt >> $S
  awk -F: '/^[a-z0-9]+ [a-z_+]+ T=/ { n = split($2, r, " "); s = 0; for (i = 1; i <= n; ++i) s += r[i];
    if (n) printf "%s mean %.4f (n=%d)\n", $1, s / n, n }' $OUT/ab/summary.txt | sort > $L/means.txt
  cat $L/means.txt >> $S
  mv $OUT/ab $L/ab
  b=$(awk '$1 == "base" && $2 == "forward_prepare" && $3 == "T=16384" { print $5 }' $L/means.txt)
  BEST=$(awk -v b="$b" '$1 != "base" && $2 == "forward_prepare" && $3 == "T=16384" && $5 < b { print $5, $1 }' $L/means.txt | sort -n | head -${NBEST:-2} | awk '{ printf "%s ", $2 }')
  echo "checked (fastest at prepare 16384, below base $b): $BEST (t=$(( $(date +%s) - T0 )) s)" >> $S
  if [ -n "$BEST" ]; then
    TEST_TIMEOUT=60 bash tools/gpu/ab_bench.sh $D mhc "" 0 "$BEST" > $L/ab_check.txt 2>&1
    cat $L/ab_check.txt >> $S
    mv $OUT/ab $L/abc
    v=${BEST%% *}
    if [ $(( $(date +%s) - T0 )) -lt $(( ${LIMIT:-200} - 50 )) ]; then
      timeout 25 ncu --clock-control none --kernel-name regex:MhcFwdClusterKernel --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
        -f -o $L/prep_$v $D/$v/cakegrad_mhc_bench --profile > $L/ncu_$v.txt 2>&1
      ncu -i $L/prep_$v.ncu-rep --page details > $L/det_$v.txt 2>&1
      ncu -i $L/prep_$v.ncu-rep --page source --csv --print-source sass > $L/sass_$v.csv 2>&1
      rm -f $L/prep_$v.ncu-rep
      echo "ncu $v: $(grep -E 'Duration|DRAM Throughput|Registers Per' $L/det_$v.txt | tr -s ' ' | tr '\n' ';')" >> $S
    fi
  fi
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $S 2>&1
echo "end t=$(( $(date +%s) - T0 )) s" >> $S; date -u >> $S
tar czf $OUT/logs.tgz -C $OUT l
cp $S $OUT/summary.txt
grep -v "T=[0-9]*: " $S | grep -v "backward\|forward_finish" | tail -70
