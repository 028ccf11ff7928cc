#!/usr/bin/env bash
# kda8 call 2: main (71c9ae8's KDA kernels + kda-s8's hash test) vs candidate c3 (kda-s8).
# Phase A (concurrent, correctness of c3): whole suite; main's hash lines; memcheck and racecheck
# on KdaKernels.Sanitize*. Phase B (alone): copy rate, KDA_BENCH_FWD_ONLY=1 main / c3 alternating
# x3, ncu per-kernel times of c3 (main's are call 1's).
set -uo pipefail
FINAL=${OUT:-/tmp/out}
mkdir -p "$FINAL"
O=$(mktemp -d)
pack() { tar czf "$FINAL/logs.tgz" -C "$O" .; }
D=.carry/kda8
LIMIT=${LIMIT:-170}
export PATH=$PATH:/usr/local/cuda/bin
START=$(date +%s)
el() { echo $(($(date +%s) - START)); }
left() { echo $((LIMIT - $(el))); }
summ() { grep -E "^\[  FAILED  \]|^\[  PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY|tests ran|kda hashes" "$1" | sed 's/, where GetParam.*//' | sort | uniq -c | head -20; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$O/env.txt"
(timeout 100 $D/c3_tests >"$O/all_c3.log" 2>&1; echo "all c3 rc=$? at $(el) s" >"$O/all.rc") &
(timeout 30 $D/main_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' >"$O/hash_main.log" 2>&1; echo "hash main rc=$? at $(el) s" >"$O/hash.rc") &
(timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 $D/c3_tests --gtest_filter='KdaKernels.Sanitize*' >"$O/memcheck.log" 2>&1; echo "memcheck rc=$? at $(el) s" >"$O/mc.rc") &
(timeout 105 compute-sanitizer --tool racecheck --error-exitcode 9 $D/c3_tests --gtest_filter='KdaKernels.Sanitize*' >"$O/racecheck.log" 2>&1; echo "racecheck rc=$? at $(el) s" >"$O/rc.rc") &
wait
echo "== phase A done at $(el) s"
cat "$O"/*.rc
for f in all_c3 hash_main memcheck racecheck; do echo "-- $f"; summ "$O/$f.log"; done
pack
timeout 10 $D/copybw | tee "$O/copy.txt"
for r in 1 2 3; do
  for b in main c3; do
    [ "$(left)" -gt 12 ] || break 2
    KDA_BENCH_FWD_ONLY=1 timeout 20 $D/${b}_bench >"$O/fwd_${b}_$r.txt" 2>&1
    echo "fwd $b rep $r rc=$? at $(el) s: $(grep -o 'median *[0-9.]* ms' "$O/fwd_${b}_$r.txt" | awk '{print $2}' | tr '\n' ' ')"
  done
done
pack
M=gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
if [ "$(left)" -gt 25 ]; then
  KDA_BENCH_FWD_ONLY=1 timeout $(($(left) - 8)) ncu --clock-control none --metrics $M -k regex:KdaChunk --csv $D/c3_bench >"$O/kernels_c3.csv" 2>"$O/kernels_c3.err"
  echo "ncu c3 rc=$? at $(el) s"
fi
pack
echo "== done at $(el) s"
