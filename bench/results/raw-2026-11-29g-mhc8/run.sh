#!/bin/bash
# mhc8: bitwise hashes vs main, bench alternating x3, ncu shared-load conflicts (base, G), full suite +
# memcheck + racecheck for G and GR. Everything under $OUT, logs tarred.
D=.carry/mhc8; mkdir -p $OUT/l; L=$OUT/l; S=$OUT/summary.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $S
V="G1 G GR"
for v in base $V; do ( timeout 20 $D/hash_$v > $L/h_$v.txt 2>&1; echo "rc=$?" >> $L/h_$v.txt ) & done; wait
OKV=""; for v in $V; do diff -q <(grep -v rc= $L/h_base.txt) <(grep -v rc= $L/h_$v.txt) >/dev/null && grep -q rc=0 $L/h_$v.txt && [ -s $L/h_base.txt ] && OKV="$OKV $v"; done
echo "hash-identical to base:$OKV" >> $S; cat $L/h_base.txt >> $S
B=$L/bench.txt
for rep in 1 2 3; do for v in base $V; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $B
  MHC_BENCH_T=4096,16384 timeout 15 $D/bench_$v >> $B 2>&1; echo "rc=$?" >> $B
done; done
awk '/^=== bench/{split($0, w, " "); v=w[3]} /backward_finish \| 16384/{s[v]+=$4; n[v]++} /backward_finish \| 4096/{s4[v]+=$4; n4[v]++}
  END{for (v in s) printf "%s %.4f %.4f n=%d\n", v, s[v]/n[v], s4[v]/n4[v], n[v]}' FS='|' $B | sort -k2 -n > $L/means.txt
cat $L/means.txt >> $S; grep -E "^===|copy|backward_finish \| |rc=[1-9]" $B >> $S
for v in G GR; do
  ( timeout 70 $D/tests_$v > $L/t_$v.txt 2>&1; echo "rc=$?" >> $L/t_$v.txt ) &
  for tool in memcheck racecheck; do
    ( timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_$v --gtest_filter='*Sanitize*' > $L/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> $L/s_${v}_$tool.txt ) &
  done
done
M=l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_shared_op_ld.sum,gpu__time_duration.sum
for v in base G; do echo "=== ncu $v (tests running concurrently)" >> $L/ncu.txt
  timeout 25 ncu --clock-control none -k regex:MhcBwdColumns --launch-count 1 --metrics $M $D/bench_$v --profile >> $L/ncu.txt 2>&1; echo "rc=$?" >> $L/ncu.txt; done
wait
grep -E "^===|MhcBwd|l1tex|smsp|gpu__|rc=" $L/ncu.txt | cut -c1-140 >> $S
for v in G GR; do echo "=== tests $v" >> $S; grep -E "PASSED|FAILED|tests ran|rc=" $L/t_$v.txt >> $S
  for tool in memcheck racecheck; do echo "=== $v $tool" >> $S; grep -E "SUMMARY|PASSED|FAILED|rc=" $L/s_${v}_$tool.txt >> $S; done; done
date -u >> $S
tar czf $OUT/logs.tgz -C $OUT l && rm -rf $L
cat $S
