#!/usr/bin/env bash
# kda19: one device call for the 64-row cluster state pass at the packed shape (16 documents x
# 2048 tokens, H = 16; branch kda-s19). Variants (SOURCE): base = main c3369d5; cand = kda-s19
# (KdaChunkStateKernel<64, false, true>: the two slices of a chain as one 2-CTA cluster sharing
# -W, Q Gam, Kdec^T, M, Gam_C by TMA multicast). cand must print base's hash lines (bitwise gate).
#   run: {"command": "bash .carry/kda19/run.sh", "carry": [".carry/kda19"], "timeout_s": 200}
# 1. copy rate, cluster occupancy probe (512 threads, 196096 / 220224 B); 2. hash lines (20 s cap
# each); 3. forward-only A/B, 5 alternating rounds; 4. cand's whole suite, memcheck on *Sanitize*,
# racecheck on the 64-row cluster pass's Sanitize problem, in parallel; 5. ncu of both builds'
# 64-row state pass at the packed shape while the call's time allows. ~150 s wall.
set -uo pipefail
D=.carry/kda19
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda19.tgz" -C "$out" .; }
V="base cand"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit \
  --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
timeout 10 $D/occupancy_probe > "$out/occupancy.txt" 2>&1; cat "$out/occupancy.txt"
for b in $V; do
  timeout 20 $D/$b/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' \
    > "$out/hash_$b.log" 2>&1
  echo "$b rc=$?: $(grep -h 'kda hashes' $out/hash_$b.log | tr '\n' ' ')"
done | tee "$out/hash_lines.txt"
ok=""
if [ "$(grep -hc 'kda hashes' $out/hash_base.log)" = 3 ] &&
   [ "$(grep -h 'kda hashes' $out/hash_base.log)" = "$(grep -h 'kda hashes' $out/hash_cand.log)" ]; then
  echo "cand: hash lines EQUAL base's (all three, the 64-row one included)"; ok=" cand"
else echo "cand: hash lines DIFFER from base's (not bitwise, or failed): not shippable"; fi \
  | tee "$out/hash_compare.txt"
echo "== hashes done at $(el) s"; pack
OUT=$out BENCH_ENV="KDA_BENCH_FWD_ONLY=1" BENCH_TIMEOUT=20 \
  timeout 60 bash tools/gpu/ab_bench.sh $D kda "base$ok" 5 ""
echo "== ab done at $(el) s"; cat "$out/ab/summary.txt" 2> /dev/null; pack
awk -F: '/packed\) fwd/ { split($1, a, " "); n = split($2, x, " "); s = 0
    for (i = 1; i <= n; ++i) s += x[i]; printf "mean %s packed fwd %.4f ms (%d rounds)\n", a[1], s / n, n }' \
  "$out/ab/summary.txt" 2> /dev/null | tee "$out/score.txt"
T=$D/cand/cakegrad_gpu_kda_tests
(timeout 100 $T > "$out/tests_cand.log" 2>&1; echo "rc=$?" >> "$out/tests_cand.log") &
p1=$!
(timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/memcheck_cand.log" 2>&1; echo "rc=$?" >> "$out/memcheck_cand.log") &
p2=$!
(timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='KdaKernels.SanitizeSixtyFourRowStatePass' > "$out/racecheck_cand.log" 2>&1
 echo "rc=$?" >> "$out/racecheck_cand.log") &
p3=$!
wait $p1 $p2 $p3
echo "== checks done at $(el) s"
grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY| tests from .* ran" \
  "$out/tests_cand.log" "$out/memcheck_cand.log" "$out/racecheck_cand.log" | head -24
pack
# The 64-row state pass at the packed shape (KDA_BENCH_CASES=2), ~15 s each, while time allows.
for b in cand base; do
  [ $(el) -lt 150 ] || break
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=2 timeout 25 ncu --clock-control none --import-source no \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section SchedulerStats -k regex:KdaChunkState --launch-skip 3 -c 1 -o /tmp/kda19_$b \
    $D/$b/cakegrad_kda_bench > "$out/ncu_state_$b.log" 2>&1
  echo "ncu $b rc=$? at $(el) s"
  timeout 8 ncu -i /tmp/kda19_$b.ncu-rep --page details > "$out/ncu_state_$b.txt" 2>&1
  grep -E "Duration|L2 Cache Throughput|DRAM Throughput|Issued Ipc|Stall|Cluster Size|Elapsed Cycles" \
    "$out/ncu_state_$b.txt" | head -12
  pack
done
echo "== done at $(el) s"
