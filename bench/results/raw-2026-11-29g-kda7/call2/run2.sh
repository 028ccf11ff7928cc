#!/usr/bin/env bash
# kda7 call 2: kda-dalog4 with pieces 2 + 3 (new). Phase A (concurrent, correctness): whole suite;
# both dA_log tails (150 fresh draws, chunked beside sequential); memcheck on KdaKernels.Sanitize*,
# then racecheck on the chunked backward's Sanitize test. Phase B (alone): copy rate, bench.
set -uo pipefail
FINAL=${OUT:-/tmp/out}
mkdir -p "$FINAL"
OUT=$(mktemp -d)
pack() { tar czf "$FINAL/logs.tgz" -C "$OUT" .; }
D=.carry/kda7
export PATH=$PATH:/usr/local/cuda/bin
START=$(date +%s)
el() { echo $(($(date +%s) - START)); }
summ() { grep -E "^\[  FAILED  \]|^\[  PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY|tests ran" "$1" | sed 's/, where GetParam.*//' | sort | uniq -c | head -12; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$OUT/env.txt"
tails() {
  for c in B1_T200_H2_noinit B2_T65_H1; do
    timeout 40 $D/new_tests --gtest_repeat=150 \
      --gtest_filter="Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/$c:Shapes/KdaKernelsAccuracy.MatchesFp64Reference/$c" \
      >"$OUT/dalog_$c.log" 2>&1
    echo "dalog_$c rc=$? at $(el) s"
  done
}
(timeout 80 $D/new_tests >"$OUT/all.log" 2>&1; echo "all rc=$? at $(el) s" >"$OUT/all.rc") &
(tails >"$OUT/tails.rc" 2>&1) &
(
  timeout 20 compute-sanitizer --tool memcheck --error-exitcode 9 $D/new_tests --gtest_filter='KdaKernels.Sanitize*' >"$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$? at $(el) s"
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $D/new_tests --gtest_filter='KdaKernels.SanitizeChunked*' >"$OUT/racecheck.log" 2>&1
  echo "racecheck rc=$? at $(el) s"
) >"$OUT/san.rc" 2>&1 &
wait
echo "== phase A done at $(el) s"
cat "$OUT"/*.rc
for f in all memcheck racecheck dalog_B1_T200_H2_noinit dalog_B2_T65_H1; do echo "-- $f"; summ "$OUT/$f.log"; done
for c in B1_T200_H2_noinit B2_T65_H1; do
  for tag in "kda chunked bwd" "kda \]"; do
    grep -h "$tag.*dA_log" "$OUT/dalog_$c.log" | grep -o "rel-L2 [0-9.e+-]*" | awk '{print $2}' | sort -g |
      awk -v c="$c" -v tag="$tag" '{ n++; v[n] = $1; over += $1 > 1e-4; o3 += $1 > 3e-5 }
        END { printf "%s [%s] dA_log over 1e-4: %d of %d, over 3e-5: %d, median %s, worst %s\n", c, tag, over, n, o3, v[int((n+1)/2)], v[n] }'
  done
done
grep -hE "kda chunked bwd.*(dA_log|ddt_bias|dinit)" "$OUT/all.log" | sort -k8 -g | tail -4
pack
timeout 10 $D/copybw | tee "$OUT/copy.txt"
left=$((125 - $(el)))
echo "bench timeout $left s"
if [ "$left" -gt 5 ]; then
  timeout "$left" $D/new_bench >"$OUT/bench_new.txt" 2>&1
  echo "bench new rc=$? at $(el) s"
  grep -E "median|vs sequential" "$OUT/bench_new.txt"
fi
pack
echo "== done at $(el) s"
