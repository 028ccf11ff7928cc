#!/usr/bin/env bash
# mhc21 (eleventh session): FwdUWarps with one pre item and whole item batches a U thread (the
# traits force both; the ragged-item branches were dead code). SASS of the with-U kernel changes
# in the U warps (register choice, 8 instructions fewer).
#   base = main b3b5564 (mhc20's new), simp = base + that change; Release kernels-only.
# 1. copy rate; 2. fhash of simp against the recorded lines (bitwise gate); 3. ab_bench
# base/simp, 5 rounds, with simp's whole suite, memcheck and racecheck on *Sanitize*.
# run: {"command": "bash .carry/mhc21/run.sh", "carry": [".carry/mhc21"], "timeout_s": 200}
set -u
export PATH=$PATH:/usr/local/cuda/bin
D=.carry/mhc21 L=${OUT:-/tmp/out}/l
mkdir -p "$L"; S=$L/summary.txt
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$S"
timeout 15 $D/copybw 2>&1 | tee -a "$S"
timeout 60 $D/simp/fhash > "$L/h_new.txt" 2>&1; echo "rc=$?" >> "$L/h_new.txt"
if diff -q $D/expected_fhash.txt "$L/h_new.txt" > /dev/null; then echo "fhash simp == recorded: yes"
else echo "fhash simp == recorded: NO"; diff $D/expected_fhash.txt "$L/h_new.txt" | head; fi | tee -a "$S"
BENCH_TIMEOUT=30 TEST_TIMEOUT=120 OUT=$L timeout 170 bash tools/gpu/ab_bench.sh $D mhc "base simp" 5 \
  "simp" > "$L/ab_stdout.txt" 2>&1
echo "ab rc=$? (t=$(el) s)" | tee -a "$S"
cat "$L/ab_stdout.txt" | tail -30 | tee -a "$S"
tar czf "${OUT:-/tmp/out}/mhc21.tgz" -C "$L" .
