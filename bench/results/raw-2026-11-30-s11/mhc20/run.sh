#!/usr/bin/env bash
# mhc20 (eleventh session): the mHC cluster kernel's barrier init moved to the kernel's start for
# both variants (racecheck false positives of the predicated init, see mhc_forward.cu).
#   base = main be5d89d (kernels of a0baeb4), new = main + that change; Release kernels-only.
# 1. copy rate; 2. fhash of new against the recorded lines (bitwise gate); 3. racecheck
# --racecheck-report all on MhcKernels.SanitizeSmall, base and new, twice; 4. new's whole suite,
# memcheck and racecheck (default report) on *Sanitize*; 5. ab_bench base/new, 3 rounds.
# run: {"command": "bash .carry/mhc20/run.sh", "carry": [".carry/mhc20"], "timeout_s": 200}
set -u
export PATH=$PATH:/usr/local/cuda/bin
D=.carry/mhc20 L=${OUT:-/tmp/out}/l
mkdir -p "$L"; S=$L/summary.txt
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$S"
timeout 15 $D/copybw 2>&1 | tee -a "$S"
timeout 60 $D/new/fhash > "$L/h_new.txt" 2>&1; echo "rc=$?" >> "$L/h_new.txt"
if diff -q $D/expected_fhash.txt "$L/h_new.txt" > /dev/null; then echo "fhash new == recorded: yes"
else echo "fhash new == recorded: NO"; diff $D/expected_fhash.txt "$L/h_new.txt" | head; fi | tee -a "$S"
for i in 1 2; do
  for v in base new; do
    timeout 45 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 40 \
      --error-exitcode 9 $D/$v/cakegrad_gpu_mhc_tests --gtest_filter='MhcKernels.SanitizeSmall' \
      > "$L/race_${v}_$i.log" 2>&1
    echo "race-all $v run $i: rc=$? $(grep 'RACECHECK SUMMARY' "$L/race_${v}_$i.log") (t=$(el) s)" | tee -a "$S"
  done
done
BENCH_TIMEOUT=30 TEST_TIMEOUT=120 OUT=$L timeout 170 bash tools/gpu/ab_bench.sh $D mhc "base new" 3 \
  "new" > "$L/ab_stdout.txt" 2>&1
echo "ab rc=$? (t=$(el) s)" | tee -a "$S"
cat "$L/ab_stdout.txt" | tail -30 | tee -a "$S"
tar czf "${OUT:-/tmp/out}/mhc20.tgz" -C "$L" .
