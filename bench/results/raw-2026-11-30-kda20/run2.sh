#!/usr/bin/env bash
# kda20, call 2: the shipped head (final = kda-s20 5ad5594, kernels SASS-identical to call 1's
# measured `cl`): hash gate against base, the whole suite, memcheck on *Sanitize*, racecheck on the
# 32-row Sanitize test (in parallel), then a short forward-only A/B base / final while time allows.
#   run: {"command": "bash .carry/kda20/run2.sh", "carry": [".carry/kda20"], "timeout_s": 100}
set -uo pipefail
D=.carry/kda20
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda20_2.tgz" -C "$out" .; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit \
  --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
for b in base final; do
  timeout 15 $D/$b/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' \
    > "$out/hash_$b.log" 2>&1
  echo "$b rc=$?: $(grep -h 'kda hashes' $out/hash_$b.log | tr '\n' ' ')"
done | tee "$out/hash_lines.txt"
if [ "$(grep -hc 'kda hashes' $out/hash_base.log)" = 3 ] &&
   [ "$(grep -h 'kda hashes' $out/hash_base.log)" = "$(grep -h 'kda hashes' $out/hash_final.log)" ]; then
  echo "final: hash lines EQUAL base's (all three)"
else
  echo "final: hash lines DIFFER from base's: not shippable"
fi > "$out/hash_compare.txt"
cat "$out/hash_compare.txt"; pack
T=$D/final/cakegrad_gpu_kda_tests
(timeout 72 $T > "$out/tests_final.log" 2>&1; echo "rc=$?" >> "$out/tests_final.log") &
p1=$!
(timeout 72 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/memcheck_final.log" 2>&1; echo "rc=$?" >> "$out/memcheck_final.log") &
p2=$!
(timeout 72 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='KdaKernels.SanitizeThirtyTwoRowStatePass' > "$out/racecheck_final.log" 2>&1
 echo "rc=$?" >> "$out/racecheck_final.log") &
p3=$!
wait $p1 $p2 $p3
echo "== checks done at $(el) s"
grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY| tests from .* ran" \
  "$out/tests_final.log" "$out/memcheck_final.log" "$out/racecheck_final.log" | head -24
grep -h "ThirtyTwoRow" "$out/tests_final.log" | head -4
pack
left=$((94 - $(el)))
if [ $left -gt 12 ]; then
  OUT=$out BENCH_ENV="KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=0" BENCH_TIMEOUT=8 \
    timeout $left bash tools/gpu/ab_bench.sh $D kda "base final" 3 ""
  cat "$out/ab/summary.txt" 2> /dev/null
fi
echo "== done at $(el) s"; pack
