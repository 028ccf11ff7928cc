#!/usr/bin/env bash
# kda18: one device call for the 16-row cluster state pass at (1, 32768, 16) (branch kda-s18).
# Variants (SOURCE): base = main d53b636; db = Kdec^T | M, Gam_C double-buffered and issued
# mid-chunk, Q Gam single (kda-s18 31dbdea); dbcta = db + the peer arrive as .release.cta
# (kda-s18-cta). Every variant must print main's hash lines (bitwise gate).
#   run: {"command": "bash .carry/kda18/run.sh", "carry": [".carry/kda18"], "timeout_s": 240}
# 1. copy rate, cluster occupancy probe; 2. hash lines (20 s cap each); 3. forward-only A/B, 5
# alternating rounds; 4. the best: whole suite, memcheck on *Sanitize*, racecheck on the cluster
# pass's Sanitize problem, in parallel; 5. ncu of base's and the best's state pass if time is left.
set -uo pipefail
D=.carry/kda18
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda18.tgz" -C "$out" .; }
V="base db dbcta"
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
for b in $V; do
  [ $b = base ] && continue
  if [ -n "$(grep -h 'kda hashes' $out/hash_base.log)" ] &&
     [ "$(grep -h 'kda hashes' $out/hash_base.log)" = "$(grep -h 'kda hashes' $out/hash_$b.log)" ]; then
    echo "$b: hash lines EQUAL base's"
  else echo "$b: hash lines DIFFER from base's (not bitwise, or failed: not benched)"; fi
done | tee "$out/hash_compare.txt"
ok=$(awk '/EQUAL/{sub(":","",$1); printf " %s", $1}' "$out/hash_compare.txt")
echo "== hashes done at $(el) s; bitwise:$ok"; pack
OUT=$out BENCH_ENV="KDA_BENCH_FWD_ONLY=1" BENCH_TIMEOUT=20 \
  timeout 90 bash tools/gpu/ab_bench.sh $D kda "base$ok" 5 ""
echo "== ab done at $(el) s"; pack
best=$(awk -F: '
  / T32768 H16 fwd/ { split($1, a, " "); v = a[1]; n = split($2, x, " "); s = 0
    for (i = 1; i <= n; ++i) s += x[i]; m[v] = s / n }
  END { bs = 1e9; b = ""
    for (v in m) { printf "mean %s %.4f\n", v, m[v] > "/dev/stderr"
      if (v != "base" && m[v] < bs) { bs = m[v]; b = v } }
    print b }' "$out/ab/summary.txt" 2> "$out/score.txt")
cat "$out/score.txt"; echo "best: ${best:-none}" | tee -a "$out/score.txt"
[ -n "$best" ] || best=base
T=$D/$best/cakegrad_gpu_kda_tests
(timeout 110 $T > "$out/tests_$best.log" 2>&1; echo "rc=$?" >> "$out/tests_$best.log") &
p1=$!
(timeout 110 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/memcheck_$best.log" 2>&1; echo "rc=$?" >> "$out/memcheck_$best.log") &
p2=$!
(timeout 110 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='KdaKernels.SanitizePackedAndMalformedCuSeqlens' > "$out/racecheck_$best.log" 2>&1
 echo "rc=$?" >> "$out/racecheck_$best.log") &
p3=$!
wait $p1 $p2 $p3
echo "== checks done at $(el) s"
grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY| tests from .* ran" \
  "$out/tests_$best.log" "$out/memcheck_$best.log" "$out/racecheck_$best.log" | head -24
pack
# State pass profiles at (1, 32768, 16), ~15 s each: only while the call's 240 s allow.
for b in $best base; do
  [ $(el) -lt 195 ] || break
  [ $b = base ] && [ $best = base ] && continue
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=1 timeout 25 ncu --clock-control none --import-source no \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section SchedulerStats -k regex:KdaChunkState --launch-skip 3 -c 1 -o /tmp/kda18_$b \
    $D/$b/cakegrad_kda_bench > "$out/ncu_state_$b.log" 2>&1
  echo "ncu $b rc=$? at $(el) s"
  timeout 8 ncu -i /tmp/kda18_$b.ncu-rep --page details > "$out/ncu_state_$b.txt" 2>&1
  grep -E "Duration|L2 Cache Throughput|DRAM Throughput|Issued Ipc|Stall|Cluster Size" \
    "$out/ncu_state_$b.txt" | head -12
  pack
done
echo "== done at $(el) s"
