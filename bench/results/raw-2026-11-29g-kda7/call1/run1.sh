#!/usr/bin/env bash
# kda7 call 1: kda-dalog4 (new) against main (base) on the same machine.
# Phase A (concurrent, correctness): new suite; both dA_log tails (150 draws, chunked beside
# sequential); forward record hashes of both builds; memcheck on KdaKernels.Sanitize*.
# Phase B (alone): bench base / new alternating, two reps each.
set -uo pipefail
FINAL=${OUT:-/tmp/out}
mkdir -p "$FINAL"
OUT=$(mktemp -d)
pack() { tar czf "$FINAL/logs.tgz" -C "$OUT" .; }
D=.carry/kda7
export PATH=$PATH:/usr/local/cuda/bin
START=$(date +%s)
el() { echo $(($(date +%s) - START)); }
summ() { grep -E "^\[  FAILED  \]|^\[  PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY|tests ran" "$1" | sort | uniq -c | head -12; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; } | tee "$OUT/env.txt"
tails() {
  for c in B1_T200_H2_noinit B2_T65_H1; do
    timeout 75 $D/new_tests --gtest_repeat=150 \
      --gtest_filter="Shapes/KdaChunkedBackwardAccuracy.MatchesFp64Reference/$c:Shapes/KdaKernelsAccuracy.MatchesFp64Reference/$c" \
      >"$OUT/dalog_$c.log" 2>&1
    echo "dalog_$c rc=$? at $(el) s"
  done
}
(timeout 120 $D/new_tests >"$OUT/all.log" 2>&1; echo "all rc=$? at $(el) s" >"$OUT/all.rc") &
(tails >"$OUT/tails.rc" 2>&1) &
(
  H=KdaKernels.ForwardRecordHashesForCrossBuildComparison
  timeout 30 $D/base_tests --gtest_filter=$H 2>&1 | grep "kda hashes" | sed 's/^/base /'
  timeout 30 $D/new_tests --gtest_filter=$H 2>&1 | grep "kda hashes" | sed 's/^/new  /'
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $D/new_tests --gtest_filter='KdaKernels.Sanitize*' >"$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$? at $(el) s"
) >"$OUT/hashes.log" 2>&1 &
wait
echo "== phase A done at $(el) s"
cat "$OUT"/*.rc; cat "$OUT/hashes.log"
for f in all memcheck dalog_B1_T200_H2_noinit dalog_B2_T65_H1; do echo "-- $f"; summ "$OUT/$f.log"; done
for c in B1_T200_H2_noinit B2_T65_H1; do
  for tag in "kda chunked bwd" "kda \]"; do
    grep -h "$tag.*dA_log" "$OUT/dalog_$c.log" | grep -o "rel-L2 [0-9.e+-]*" | awk '{print $2}' | sort -g |
      awk -v c="$c" -v tag="$tag" '{ n++; v[n] = $1; over += $1 > 1e-4; o3 += $1 > 3e-5 }
        END { printf "%s [%s] dA_log over 1e-4: %d of %d, over 3e-5: %d, median %s, worst %s\n", c, tag, over, n, o3, v[int((n+1)/2)], v[n] }'
  done
done
grep -hE "kda chunked bwd.*(dA_log|ddt_bias|dinit)" "$OUT/all.log" | sort -k8 -g | tail -4
pack
for rep in 1 2; do
  for b in base new; do
    timeout 40 $D/${b}_bench >"$OUT/bench_${b}_$rep.txt" 2>&1
    echo "bench $b rep $rep rc=$? at $(el) s"
    grep -E "bwd chunked  median|fwd  median|copy" "$OUT/bench_${b}_$rep.txt" | sed "s/^/$b$rep /"
  done
  pack
done
echo "== done at $(el) s"
pack
