#!/bin/bash
# mhc12 call 2: forward hashes (base, B, C, D), bench alternating x3, full mHC suite + memcheck/racecheck
# (+ synccheck) on *Sanitize* for C, D, E (B: hash and bench only). Everything under $OUT; logs tarred.
D=.carry/mhc12; L=$OUT/l; mkdir -p $L; S=$OUT/summary.txt
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } > $S
V="B C D E"
for v in base $V; do ( timeout 25 $D/fhash_$v > $L/h_$v.txt 2>&1; echo "rc=$?" >> $L/h_$v.txt ) & done; wait
OKV=""; for v in $V; do diff -q $L/h_base.txt $L/h_$v.txt >/dev/null && grep -q rc=0 $L/h_$v.txt && OKV="$OKV $v"; done
echo "hash-identical to base (rc=0 incl. fs==fp):$OKV" >> $S; cat $L/h_base.txt >> $S
for v in $V; do echo "-- diff base $v" >> $S; diff $L/h_base.txt $L/h_$v.txt >> $S; done
# a variant whose hash run hung is not run further (a hang would eat the call)
V2=""; for v in $V; do grep -q rc=124 $L/h_$v.txt || V2="$V2 $v"; done; V=$V2; echo "run further:$V" >> $S
TV=""; for v in $V; do [ -x $D/tests_$v ] && TV="$TV $v"; done
B=$L/bench.txt
for rep in 1 2 3; do for v in base $V; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $B
  MHC_BENCH_T=4096,16384 timeout 15 $D/bench_$v >> $B 2>&1; echo "rc=$?" >> $B
done; done
awk -F'|' '/^=== bench/{split($0, w, " "); v=w[3]} /^\| (forward_(stats|prepare)|prepare\+finish) \| /{k=v" "$2" "$3; gsub(/  +/, " ", k); s[k]+=$4; n[k]++}
  END{for (k in s) printf "%s %.4f n=%d\n", k, s[k]/n[k], n[k]}' $B | sort > $L/means.txt
cat $L/means.txt >> $S; grep -E "^===|copy|forward_(stats|prepare) \| |prepare\+finish|rc=[1-9]" $B >> $S
for v in $TV; do
  ( timeout 70 $D/tests_$v > $L/t_$v.txt 2>&1; echo "rc=$?" >> $L/t_$v.txt ) &
  for tool in memcheck racecheck $([ $v = D ] && echo synccheck); do
    ( timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_$v --gtest_filter='*Sanitize*' > $L/s_${v}_$tool.txt 2>&1; echo "rc=$?" >> $L/s_${v}_$tool.txt ) &
  done
done
wait
for v in $TV; do echo "=== tests $v" >> $S; grep -E "PASSED|FAILED|tests ran|rc=" $L/t_$v.txt >> $S
  for tool in memcheck racecheck synccheck; do echo "=== $v $tool" >> $S; grep -E "SUMMARY|PASSED|FAILED|rc=" $L/s_${v}_$tool.txt >> $S; done; done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $S
date -u >> $S
cp $S $L/; tar czf $OUT/logs.tgz -C $OUT l && rm -rf $L
cat $S
