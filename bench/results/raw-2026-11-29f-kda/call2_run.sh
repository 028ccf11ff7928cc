#!/usr/bin/env bash
# kda-s6 call 2. Binaries: main_* (main 5e1f1e1); a_* (8d2adc3: chain alone + output pass at 16
# rows, serial; its kernels passed the whole suite in call 1); b_* (abb4305: output pass overlapped,
# 8 segments, side stream); c_* (b + the preparation in 8 segments on a second side stream).
# Phase A (concurrent, untimed): whole suite of b and c, hashes of all, memcheck + racecheck of b, c.
# Phase B (alone, budgeted): fwd-only main/a/b/c alternating x2, ncu per-kernel at case 1 for c,
# full bench of the fastest candidate whose suite passed.
set -uo pipefail
FINAL=${OUT:-/tmp/out}
mkdir -p "$FINAL"
OUT=$(mktemp -d)
pack() { tar czf "$FINAL/logs.tgz" -C "$OUT" .; }
D=.carry/kda
export PATH=$PATH:/usr/local/cuda/bin
START=$(date +%s)
BUDGET=${BUDGET:-136}
el() { echo $(($(date +%s) - START)); }
left() { echo $((BUDGET - $(el))); }
summ() { grep -E "^\[  FAILED  \]|^\[  PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY|tests ran" "$1" | sort | uniq -c | head -12; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$OUT/env.txt"
echo "all_a rc=call1" >"$OUT/all_a.rc"
(timeout 80 $D/b_tests >"$OUT/all_b.log" 2>&1; echo "all_b rc=$?" >"$OUT/all_b.rc") &
(timeout 80 $D/c_tests >"$OUT/all_c.log" 2>&1; echo "all_c rc=$?" >"$OUT/all_c.rc") &
(
  H=KdaKernels.ForwardRecordHashesForCrossBuildComparison
  for x in main a b c; do timeout 20 $D/${x}_tests --gtest_filter=$H 2>&1 | grep "kda hashes" | sed "s/^/$x /"; done
) >"$OUT/hashes.log" 2>&1 &
for x in c b; do
(
  timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $D/${x}_tests --gtest_filter='KdaKernels.Sanitize*' >"$OUT/memcheck_$x.log" 2>&1
  echo "memcheck $x rc=$?"
  timeout 45 compute-sanitizer --tool racecheck --error-exitcode 9 $D/${x}_tests --gtest_filter='KdaKernels.Sanitize*' >"$OUT/racecheck_$x.log" 2>&1
  echo "racecheck $x rc=$?"
) >"$OUT/san_$x.rc" 2>&1 &
done
wait
echo "== phase A done at $(el) s"
cat "$OUT"/*.rc
for f in all_b all_c memcheck_b racecheck_b memcheck_c racecheck_c; do echo "-- $f"; summ "$OUT/$f.log"; done
cat "$OUT/hashes.log"
pack
fb() { KDA_BENCH_FWD_ONLY=1 timeout 20 "$@" 2>&1 | tee -a "$OUT/bench_fwd_raw.txt" | grep -E "fwd  median|copy:" | sed -E 's/.*fwd  median +([0-9.]+) ms.*/\1/; s/.*-> ([0-9.]+) GB.s.*/copy \1 GB\/s/' | tr '\n' ' '; echo; }
for rep in 1 2; do
  for x in main a b c; do
    [ "$(left)" -lt 8 ] && { echo "skip $x rep $rep (time)"; continue; }
    echo "rep $rep $x: $(fb $D/${x}_bench)"
  done
done 2>&1 | tee "$OUT/bench_fwd.txt"
echo "== fwd benches done at $(el) s"
pack
# The fastest candidate at case 1 (mean of the reps) whose suite passed (a: call 1's).
pick=$(awk '/rep [12] [abc]:/ {v=$(NF-1); s[$3]+=v; n[$3]++} END {for (k in s) print s[k]/n[k], k}' "$OUT/bench_fwd.txt" | sort -g | tr -d ':' | while read t x; do
  grep -q "rc=0\|rc=call1" "$OUT/all_$x.rc" 2>/dev/null && { echo $x; break; }; done)
pick=${pick:-a}
echo "pick: $pick"
if [ "$(left)" -gt 36 ]; then
  timeout $(($(left) - 2)) $D/${pick}_bench >"$OUT/bench_full_$pick.txt" 2>&1; echo "full bench $pick rc=$? at $(el) s"
elif [ "$(left)" -gt 14 ]; then
  KDA_BENCH_CASES=1 timeout $(($(left) - 2)) $D/${pick}_bench >"$OUT/bench_full_$pick.txt" 2>&1; echo "full bench (case 1) $pick rc=$? at $(el) s"
fi
grep -E "median|copy" "$OUT/bench_full_$pick.txt" 2>/dev/null
pack
if [ "$(left)" -gt 10 ]; then
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=1 timeout $(($(left) - 1)) ncu --clock-control none --metrics gpu__time_duration.sum -k regex:KdaChunk --csv $D/${pick}_bench >"$OUT/ncu_$pick.csv" 2>&1
  echo "ncu $pick rc=$? at $(el) s"
fi
pack
echo "== done at $(el) s"
