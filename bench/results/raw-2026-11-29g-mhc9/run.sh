#!/bin/bash
# mhc9: forward bitwise hashes vs main, bench alternating x3, ncu (base, B), full suite for A/B/C
# and memcheck + racecheck on *Sanitize* for A/B/C. Everything under $OUT, logs tarred.
D=.carry/mhc9; mkdir -p $OUT/l; L=$OUT/l; S=$OUT/summary.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $S
V="A B C"
for v in base $V; do ( timeout 25 $D/fhash_$v > $L/h_$v.txt 2>&1; echo "rc=$?" >> $L/h_$v.txt ) & done; wait
OKV=""; for v in $V; do diff -q $L/h_base.txt $L/h_$v.txt >/dev/null && grep -q rc=0 $L/h_$v.txt && OKV="$OKV $v"; done
echo "hash-identical to base (rc=0 incl. fs==fp):$OKV" >> $S; cat $L/h_base.txt >> $S
for v in $V; do echo "-- $v" >> $S; diff $L/h_base.txt $L/h_$v.txt >> $S; done
B=$L/bench.txt
for rep in 1 2 3; do for v in base $V; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $B
  MHC_BENCH_T=4096,16384 timeout 15 $D/bench_$v >> $B 2>&1; echo "rc=$?" >> $B
done; done
awk -F'|' '/^=== bench/{split($0, w, " "); v=w[3]} /^\| forward_(stats|prepare) \| /{k=v" "$2" "$3; gsub(/  +/, " ", k); s[k]+=$4; n[k]++}
  END{for (k in s) printf "%s %.4f n=%d\n", k, s[k]/n[k], n[k]}' $B | sort > $L/means.txt
cat $L/means.txt >> $S; grep -E "^===|copy|forward_(stats|prepare) \| |rc=[1-9]" $B >> $S
for v in base B; do echo "=== ncu $v" >> $L/ncu.txt
  timeout 20 ncu --clock-control none -k regex:MhcFwdClusterKernel --launch-count 2 --section SpeedOfLight --section WarpStateStats $D/bench_$v --profile >> $L/ncu.txt 2>&1; echo "rc=$?" >> $L/ncu.txt; done
grep -E "^===|MhcFwd|Duration|Throughput|Stall|Warp Cycles|rc=" $L/ncu.txt | cut -c1-150 >> $S
for v in $V; do
  ( timeout 60 $D/tests_$v > $L/t_$v.txt 2>&1; echo "rc=$?" >> $L/t_$v.txt ) &
  for tool in memcheck racecheck; do
    ( timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_$v --gtest_filter='*Sanitize*' > $L/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> $L/s_${v}_$tool.txt ) &
  done
done
wait
for v in $V; do echo "=== tests $v" >> $S; grep -E "PASSED|FAILED|tests ran|rc=" $L/t_$v.txt >> $S
  for tool in memcheck racecheck; do echo "=== $v $tool" >> $S; grep -E "SUMMARY|PASSED|FAILED|rc=" $L/s_${v}_$tool.txt >> $S; done; done
date -u >> $S
tar czf $OUT/logs.tgz -C $OUT l && rm -rf $L
cat $S
