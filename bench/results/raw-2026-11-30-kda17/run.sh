#!/usr/bin/env bash
# kda17: one device call for the 16-row state pass at (1, 32768, 16) as 2-CTA clusters sharing the
# record operands by multicast (branch kda-s17). Variants (SOURCE): base = main be5d89d; mc1 =
# row bulk copies issued by one o warp; mc2 = by the four o warps; tma = tensor copies (128-byte
# swizzle), 4 a CTA a chunk. Every variant must print main's hash lines (bitwise gate).
#   run: {"command": "bash .carry/kda17/run.sh", "carry": [".carry/kda17"], "timeout_s": 300}
# 1. copy rate; 2. hash lines (20 s cap each: a deadlocked cluster variant costs 20 s, no more);
# 3. forward-only A/B, 4 alternating rounds, of base and the bitwise variants; 4. ncu (4
# sections) of the state pass at (1, 32768, 16): base and the best; 5. the best gets the whole
# suite, memcheck and racecheck on *Sanitize*; 6. full bench of the best if time is left.
set -uo pipefail
D=.carry/kda17
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda17.tgz" -C "$out" .; }
V=$(cat $D/VARIANTS)
{ date -u +%FT%TZ; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit \
  --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
for b in $V; do
  timeout 20 $D/$b/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' \
    > "$out/hash_$b.log" 2>&1
  echo "$b rc=$?: $(grep -h 'kda hashes' $out/hash_$b.log | tr '\n' ' ')"
done | tee "$out/hash_lines.txt"
ok=""
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
  timeout 100 bash tools/gpu/ab_bench.sh $D kda "base$ok" 4 ""
echo "== ab done at $(el) s"; pack
# Best: the lowest mean at (1, 32768, 16), the one shape on the 16-row pass.
best=$(awk -F: -v ok="$ok" '
  / T32768 H16 fwd/ { split($1, a, " "); v = a[1]; n = split($2, x, " "); s = 0
    for (i = 1; i <= n; ++i) s += x[i]; m[v] = s / n }
  END { bs = 1e9; b = ""
    for (v in m) { printf "mean %s %.4f\n", v, m[v] > "/dev/stderr"
      if (v != "base" && m[v] < bs) { bs = m[v]; b = v } }
    print b }' "$out/ab/summary.txt" 2> "$out/score.txt")
cat "$out/score.txt"; echo "best: ${best:-none}" | tee -a "$out/score.txt"
[ -n "$best" ] || best=base
T=$D/$best/cakegrad_gpu_kda_tests
(timeout 130 $T > "$out/tests_$best.log" 2>&1; echo "rc=$?" >> "$out/tests_$best.log") &
p1=$!
# State pass profiles (the suite runs beside: durations indicative, stall shares the point).
for b in base $best; do
  [ $b = base ] && [ $best = base ] && continue
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=1 timeout 45 ncu --clock-control none --import-source no \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section LaunchStats --section SourceCounters \
    -k regex:KdaChunkState --launch-skip 3 -c 1 -o /tmp/kda17_$b \
    $D/$b/cakegrad_kda_bench > "$out/ncu_state_$b.log" 2>&1
  echo "ncu $b rc=$? at $(el) s"
  timeout 15 ncu -i /tmp/kda17_$b.ncu-rep --page details > "$out/ncu_state_$b.txt" 2>&1
  timeout 15 ncu -i /tmp/kda17_$b.ncu-rep --page source --csv --print-source sass \
    > "$out/src_state_$b.csv" 2>&1
  timeout 10 python3 $D/ncu_sass_segments.py "$out/src_state_$b.csv" > "$out/segments_$b.txt" 2>&1
  rm -f "$out/src_state_$b.csv"
  grep -E "Duration|L2 Cache Throughput|DRAM Throughput|Issued Ipc|Eligible Warps|Cluster Size" \
    "$out/ncu_state_$b.txt" | head -10
  head -16 "$out/segments_$b.txt"
done
pack
(timeout 140 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/memcheck_$best.log" 2>&1; echo "rc=$?" >> "$out/memcheck_$best.log") &
p2=$!
(timeout 140 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='KdaKernels.SanitizePackedAndMalformedCuSeqlens' > "$out/racecheck_$best.log" 2>&1
 echo "rc=$?" >> "$out/racecheck_$best.log") &
p3=$!
wait $p1 $p2 $p3
echo "== checks done at $(el) s"
grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY| tests from .* ran" \
  "$out/tests_$best.log" "$out/memcheck_$best.log" "$out/racecheck_$best.log" | head -24
pack
for b in base $best; do
  [ $(el) -lt 240 ] || break
  timeout 25 $D/$b/cakegrad_kda_bench > "$out/full_bench_$b.txt" 2>&1
  echo "full bench $b rc=$? at $(el) s"; grep median "$out/full_bench_$b.txt"
done
pack
echo "== done at $(el) s"
