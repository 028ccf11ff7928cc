#!/usr/bin/env bash
# kda20: one device call for the 32-row cluster state pass at (1, 8192, 32) (branch kda-s20).
# Variants (SOURCE): base = main e360d94; cand = kda-s20 (KdaChunkStateKernel<32, false, true>:
# 2-CTA clusters sharing -W, Q Gam, Kdec^T, M, Gam_C by TMA multicast, a producer warp); cl = side
# branch kda-s20-cl (the same, the copies issued by lane 0 of chain warp 0, 256 threads: what the
# producer warp buys). A variant enters the A/B only if it prints base's hash lines (bitwise gate).
#   run: {"command": "bash .carry/kda20/run.sh", "carry": [".carry/kda20"], "timeout_s": 300}
# 1. copy rate, cluster occupancy probe (256 / 288 threads, 161280 / 201776 B); 2. hash lines (20 s
# cap each); 3. forward-only A/B, 5 alternating rounds (cand only if bitwise); 4. cand's whole
# suite, memcheck on *Sanitize*, racecheck on the 32-row Sanitize test, in parallel; 5. ncu of both
# builds' 32-row state pass at (1, 8192, 32) while the call's time allows. ~200 s wall.
# kda19's script set `ok` inside an `if ... fi | tee` pipeline (a subshell), so its A/B ran base
# alone: here the decisions are made in this shell, written to a file, and only then printed.
set -uo pipefail
D=.carry/kda20
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda20.tgz" -C "$out" .; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit \
  --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
timeout 10 $D/occupancy_probe > "$out/occupancy.txt" 2>&1; cat "$out/occupancy.txt"
for b in base cand cl; do
  timeout 20 $D/$b/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' \
    > "$out/hash_$b.log" 2>&1
  echo "$b rc=$?: $(grep -h 'kda hashes' $out/hash_$b.log | tr '\n' ' ')"
done | tee "$out/hash_lines.txt"
ok=""
for b in cand cl; do
  if [ "$(grep -hc 'kda hashes' $out/hash_base.log)" = 3 ] &&
     [ "$(grep -h 'kda hashes' $out/hash_base.log)" = "$(grep -h 'kda hashes' $out/hash_$b.log)" ]; then
    ok="$ok $b"
    echo "$b: hash lines EQUAL base's (all three, the 32-row one included)"
  else
    echo "$b: hash lines DIFFER from base's (not bitwise, or failed): not shippable"
  fi
done > "$out/hash_compare.txt"
echo "A/B variants: base$ok" >> "$out/hash_compare.txt"
cat "$out/hash_compare.txt"
echo "== hashes done at $(el) s"; pack
OUT=$out BENCH_ENV="KDA_BENCH_FWD_ONLY=1" BENCH_TIMEOUT=20 \
  timeout 90 bash tools/gpu/ab_bench.sh $D kda "base$ok" 5 ""
echo "== ab done at $(el) s"; cat "$out/ab/summary.txt" 2> /dev/null; pack
awk -F: '/fwd/ { k = $1; n = split($2, x, " "); s = 0
    for (i = 1; i <= n; ++i) s += x[i]; printf "mean %s %.4f ms (%d rounds)\n", k, s / n, n }' \
  "$out/ab/summary.txt" 2> /dev/null | tee "$out/score.txt"
T=$D/cand/cakegrad_gpu_kda_tests
(timeout 110 $T > "$out/tests_cand.log" 2>&1; echo "rc=$?" >> "$out/tests_cand.log") &
p1=$!
(timeout 110 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/memcheck_cand.log" 2>&1; echo "rc=$?" >> "$out/memcheck_cand.log") &
p2=$!
(timeout 110 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='KdaKernels.SanitizeThirtyTwoRowStatePass' > "$out/racecheck_cand.log" 2>&1
 echo "rc=$?" >> "$out/racecheck_cand.log") &
p3=$!
wait $p1 $p2 $p3
echo "== checks done at $(el) s"
grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY| tests from .* ran" \
  "$out/tests_cand.log" "$out/memcheck_cand.log" "$out/racecheck_cand.log" | head -24
pack
# The 32-row state pass at (1, 8192, 32) (KDA_BENCH_CASES=0), ~15 s each, while time allows.
for b in cand base cl; do
  [ $(el) -lt 240 ] || break
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=0 timeout 25 ncu --clock-control none --import-source no \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section LaunchStats --section Occupancy -k regex:KdaChunkState \
    --launch-skip 3 -c 1 -o /tmp/kda20_$b $D/$b/cakegrad_kda_bench > "$out/ncu_state_$b.log" 2>&1
  echo "ncu $b rc=$? at $(el) s"
  timeout 8 ncu -i /tmp/kda20_$b.ncu-rep --page details > "$out/ncu_state_$b.txt" 2>&1
  grep -E "Duration|L2 Cache Throughput|DRAM Throughput|Issued Ipc|Elapsed Cycles|Cluster Size|Registers Per|Block Size" \
    "$out/ncu_state_$b.txt" | head -14
  pack
done
echo "== done at $(el) s"
