#!/usr/bin/env bash
# mhc22 (eleventh session): the cluster kernel's thread 0 issues the first kStages X stages right
# after the barrier init, before the fn fragment loads (they used to wait for them); one
# StageCopies helper for the three places that issue a stage. base = main ea94e0c (mhc21's simp),
# new = base + that change; Release kernels-only.
# 1. copy rate; 2. fhash of new against the recorded lines; 3. racecheck --racecheck-report all on
# MhcKernels.SanitizeSmall (new); 4. ab_bench base/new, 5 rounds, new's suite + sanitizers.
# run: {"command": "bash .carry/mhc22/run.sh", "carry": [".carry/mhc22"], "timeout_s": 200}
set -u
export PATH=$PATH:/usr/local/cuda/bin
D=.carry/mhc22 L=${OUT:-/tmp/out}/l
mkdir -p "$L"; S=$L/summary.txt
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$S"
timeout 15 $D/copybw 2>&1 | tee -a "$S"
timeout 60 $D/new/fhash > "$L/h_new.txt" 2>&1; echo "rc=$?" >> "$L/h_new.txt"
if diff -q $D/expected_fhash.txt "$L/h_new.txt" > /dev/null; then echo "fhash new == recorded: yes"
else echo "fhash new == recorded: NO"; diff $D/expected_fhash.txt "$L/h_new.txt" | head; fi | tee -a "$S"
timeout 45 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 40 \
  --error-exitcode 9 $D/new/cakegrad_gpu_mhc_tests --gtest_filter='MhcKernels.SanitizeSmall' \
  > "$L/race_new.log" 2>&1
echo "race-all new: rc=$? $(grep 'RACECHECK SUMMARY' "$L/race_new.log") (t=$(el) s)" | tee -a "$S"
BENCH_TIMEOUT=30 TEST_TIMEOUT=120 OUT=$L timeout 170 bash tools/gpu/ab_bench.sh $D mhc "base new" 5 \
  "new" > "$L/ab_stdout.txt" 2>&1
echo "ab rc=$? (t=$(el) s)" | tee -a "$S"
tail -40 "$L/ab_stdout.txt" | tee -a "$S"
rm -f "$L/ab/clocks.csv"
tar czf "${OUT:-/tmp/out}/mhc22.tgz" -C "$L" .
