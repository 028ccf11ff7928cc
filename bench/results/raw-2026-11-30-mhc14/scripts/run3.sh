#!/bin/bash
# mhc14 call 3: forward_prepare candidates against main (base). DIR .carry/mhc14/<v>/ holds
# cakegrad_mhc_bench, cakegrad_gpu_mhc_tests, fhash (stripped); SOURCE.txt says what each is.
# 1. fhash per build (25 s timeout each); only candidates with base's exact output go on.
# 2. SASS of forward_stats' kernel (MhcFwdClusterKernel<..., false>) per build, diffed with base.
# 3. tools/gpu/ab_bench.sh: benches alternating, 3 rounds, suite + memcheck + racecheck.
# 4. ncu of each surviving candidate's with-U kernel (T = 16384): details + SASS source page.
D=${D:-.carry/mhc14}
L=$OUT/l; mkdir -p $L
S=$L/summary.txt
export PATH=$PATH:/usr/local/cuda/bin
V=${V:-"r7 pf pu"}
{ date -u; cat $D/SOURCE.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } > $S 2>&1
for v in base $V; do
  (timeout 25 $D/$v/fhash > $L/h_$v.txt 2>&1; echo "rc=$?" >> $L/h_$v.txt) &
done
wait
OKV=""
for v in $V; do
  grep -q "^rc=0$" $L/h_$v.txt && diff -q $L/h_base.txt $L/h_$v.txt > /dev/null && OKV="$OKV $v"
done
{ echo "fingerprint identical to base:$OKV"; cat $L/h_base.txt
  for v in $V; do echo "-- diff base $v"; diff $L/h_base.txt $L/h_$v.txt; done; } >> $S
fsass() { cuobjdump -sass $1 | awk '/Function : .*MhcFwdClusterKernel.*Lb0E/{p=1;print;next} /Function :/{p=0} p' | sed 's@/\*[0-9a-f]*\*/@@g; s/ \+/ /g'; }
fsass $D/base/cakegrad_mhc_bench > $L/sassF_base.txt
for v in $V; do fsass $D/$v/cakegrad_mhc_bench > $L/sassF_$v.txt
  echo "stats-kernel SASS $v vs base: lines $(wc -l < $L/sassF_$v.txt) / $(wc -l < $L/sassF_base.txt), differing lines: $(diff <(tail -n +2 $L/sassF_base.txt) <(tail -n +2 $L/sassF_$v.txt) | grep -c '^[<>]')" >> $S
done
OKV=${OKV# }
if [ -n "$OKV" ]; then
  BENCH_TIMEOUT=20 bash tools/gpu/ab_bench.sh $D mhc "base $OKV" 3 "" > $L/ab_stdout.txt 2>&1
  cat $L/ab_stdout.txt >> $S
  awk -F: '/^[a-z0-9]+ [a-z_+]+ T=/ { n = split($2, r, " "); s = 0; for (i = 1; i <= n; ++i) s += r[i];
    if (n) printf "%s mean %.4f (n=%d)\n", $1, s / n, n }' $OUT/ab/summary.txt | sort > $L/means.txt
  cat $L/means.txt >> $S
  mv $OUT/ab $L/ab
  # The two fastest candidates at forward_prepare T = 16384 that beat base: suite + sanitizers, ncu.
  b=$(awk '$1 == "base" && $2 == "forward_prepare" && $3 == "T=16384" { print $5 }' $L/means.txt)
  BEST=$(awk -v b="$b" '$1 != "base" && $2 == "forward_prepare" && $3 == "T=16384" && $5 < b { print $5, $1 }' $L/means.txt | sort -n | head -${NBEST:-2} | awk '{ printf "%s ", $2 }')
  echo "checked (fastest at prepare 16384, below base $b): $BEST" >> $S
  if [ -n "$BEST" ]; then
    TEST_TIMEOUT=100 bash tools/gpu/ab_bench.sh $D mhc "" 0 "$BEST" > $L/ab_check.txt 2>&1
    cat $L/ab_check.txt >> $S
    mv $OUT/ab $L/abc
  fi
  for v in $BEST; do
    timeout 25 ncu --clock-control none --kernel-name regex:MhcFwdClusterKernel --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
      -f -o $L/prep_$v $D/$v/cakegrad_mhc_bench --profile > $L/ncu_$v.txt 2>&1
    ncu -i $L/prep_$v.ncu-rep --page details > $L/det_$v.txt 2>&1
    ncu -i $L/prep_$v.ncu-rep --page source --csv --print-source sass > $L/sass_$v.csv 2>&1
    rm -f $L/prep_$v.ncu-rep
    echo "ncu $v: $(grep -E 'Duration|DRAM Throughput' $L/det_$v.txt | tr -s ' ' | tr '\n' ';')" >> $S
  done
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $S 2>&1
date -u >> $S
tar czf $OUT/logs3.tgz -C $OUT l
cp $S $OUT/summary.txt
cat $S
