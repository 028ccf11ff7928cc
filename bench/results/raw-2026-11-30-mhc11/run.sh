#!/bin/bash
# mhc11: on the H200, from /work/main's copy with carry [".carry/mhc11"]. Every step has its own
# timeout (a deadlocked fused kernel hangs: the timeouts bound it). Logs under $OUT, tarred;
# summary.txt is the short form. Env: BUDGET (s, this call's timeout_s), TORCH (1: run
# bench/mhc_torch_ref.py at the end when the time left allows), NCU (1: ncu of the MhcBwd kernels),
# EXTRA_BENCH (more builds bench_X to alternate with), BENCH_T (default 4096,16384).
D=.carry/mhc11; mkdir -p $OUT/l; L=$OUT/l; S=$OUT/summary.txt; BUDGET=${BUDGET:-200}
{ date -u; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > $S
left() { echo $((BUDGET - SECONDS)); }
# 1. hashes: main's default path; the branch's default and fused paths (fused: 2 runs with other
# poisoned workspaces + a graph replayed twice), fused vs default per shape.
( timeout 40 $D/hash_main > $L/h_main.txt 2>&1; echo "rc=$?" >> $L/h_main.txt )
( timeout 60 $D/hash_fused > $L/h_fused.txt 2>&1; echo "rc=$?" >> $L/h_fused.txt )
echo "=== hash main" >> $S; cat $L/h_main.txt >> $S
echo "=== hash branch (default lines must equal main's; fused lines: vs default)" >> $S; cat $L/h_fused.txt >> $S
diff <(grep " default dX" $L/h_main.txt) <(grep " default dX" $L/h_fused.txt) > /dev/null \
  && echo "default path: identical to main at every shape" >> $S || echo "default path: DIFFERS from main" >> $S
if grep -q "^rc=0" $L/h_fused.txt; then FB=1; else FB=0; echo "fused hash run failed (rc above)" >> $S; fi
echo "[t=$SECONDS] hashes done" >> $S
# 2. bench, alternating main / branch (+ fused row), 3 rounds.
B=$L/bench.txt
for rep in 1 2 3; do for v in main ${EXTRA_BENCH:-} fused; do
  echo "=== bench $v rep$rep $(date -u +%T)" >> $B
  MHC_BENCH_FUSED=$([ $v = main ] && echo 0 || echo $FB) MHC_BENCH_T=${BENCH_T:-4096,16384} timeout 30 $D/bench_$v >> $B 2>&1
  echo "rc=$?" >> $B
done; done
grep -E "^===|copy|backward_finish|prepare \+|rc=[1-9]" $B >> $S
awk -F'|' '/^=== bench/{split($0, w, " "); v=w[3]} /^\| [a-z_]+ \| /{f=$2; gsub(/ /, "", f); t=$3; gsub(/ /, "", t); k=v" "f" "t; s[k]+=$4; n[k]++}
  END{for (k in s) printf "mean %s %.4f ms (n=%d)\n", k, s[k]/n[k], n[k]}' $B | sort >> $S
echo "[t=$SECONDS] bench done" >> $S
# 3. per-kernel durations (ncu, one call each at T = 16384).
if [ "${NCU:-1}" = 1 ] && [ $FB = 1 ] && [ $(left) -gt ${NCU_LEFT:-150} ]; then
  MHC_BENCH_FUSED=1 timeout 45 ncu --clock-control none -k regex:MhcBwd --launch-count 8 --section SpeedOfLight $D/bench_fused --profile > $L/ncu.txt 2>&1; echo "rc=$?" >> $L/ncu.txt
  grep -E "MhcBwd|Duration|DRAM Through|Compute \(SM\)|rc=" $L/ncu.txt | cut -c1-140 >> $S
  echo "[t=$SECONDS] ncu done" >> $S
fi
# 4. suites: default (three-kernel path; FinishPathsMatchReference runs both) and with every
# backward_finish fused (CAKEGRAD_MHC_FUSED_FINISH=1); then sanitizers on *Sanitize*, fused.
# (Call 3 ran be385aa, whose default was fused: there the two runs were unset and =0.)
TT=$([ $FB = 1 ] && echo 120 || echo 45)
( timeout 120 $D/tests_fused > $L/t_default.txt 2>&1; echo "rc=$?" >> $L/t_default.txt ) &
( CAKEGRAD_MHC_FUSED_FINISH=1 timeout $TT $D/tests_fused > $L/t_fused.txt 2>&1; echo "rc=$?" >> $L/t_fused.txt ) &
wait
grep -E "^finish paths|rel-L2 T=(7|45|4096|16384) C=4096" $L/t_fused.txt >> $S
for t in default fused; do echo "=== suite $t" >> $S; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran|Failure|rc=" $L/t_$t.txt | head -30 >> $S; done
echo "[t=$SECONDS] suites done" >> $S
if [ $FB = 1 ]; then
  for tool in memcheck racecheck; do
    ( CAKEGRAD_MHC_FUSED_FINISH=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 $D/tests_fused --gtest_filter='*Sanitize*' > $L/s_$tool.txt 2>&1; echo "rc=$?" >> $L/s_$tool.txt ) &
  done; wait
  for tool in memcheck racecheck; do echo "=== fused $tool" >> $S; grep -E "SUMMARY|PASSED|FAILED|rc=" $L/s_$tool.txt >> $S; done
  echo "[t=$SECONDS] sanitizers done" >> $S
fi
# 5. PyTorch eager / torch.compile at the bench's shapes.
if [ "${TORCH:-0}" = 1 ] && [ $(left) -gt 100 ]; then
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 10 )) python3 bench/mhc_torch_ref.py > $L/torch_ref.txt 2>&1; echo "rc=$?" >> $L/torch_ref.txt
  grep -E "^\||torch |rc=" $L/torch_ref.txt >> $S
  echo "[t=$SECONDS] torch done" >> $S
fi
date -u >> $S
tar czf $OUT/logs.tgz -C $OUT l && rm -rf $L
cat $S
