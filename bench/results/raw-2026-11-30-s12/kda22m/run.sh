#!/usr/bin/env bash
# kda22m: kda22n rebuilt on main cd2374c (base = main; next1 = + c8239a2 Uv solve four rows at a time; next3 = + bf3880e, 64c7642 pre-split parts). Lead, twelfth session.
# Variants (SOURCE): base = main bcd52ba kernels + the hash test + the bench switch (kda-s22
# 92bf3ad); next1 = d98ec6d (the Uv solve four rows at a time); next3 = 4095c01 (next1 + -W / Kdec
# and U staged as BF16 parts).
#   run: {"command": "bash .carry/kda22n/run.sh", "carry": [".carry/kda22n"], "timeout_s": 230}
# 1. copy rate; 2. hash gate (ChunkedBackwardHashes*, ForwardRecordHashes*) of every variant;
# 3. chunked-backward A/B (KDA_BENCH_CHUNKED_ONLY=1), 3 alternating rounds of base and the
# variants whose hashes equal base's; 4. on the fastest of those (sum of the three shapes' mean
# chunked backward): the whole suite, memcheck on *Sanitize*, racecheck on the chunked backward's
# Sanitize test, in parallel; 5. ncu of its KdaChunkGradKernel (B1 T8192 H32) while time allows
# (base's is in bench/results/raw-2026-11-30-kda22/). ~150 s wall.
set -uo pipefail
D=.carry/kda22m
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda22m.tgz" -C "$out" .; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit \
  --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
for b in base next1 next3; do
  timeout 40 $D/$b/cakegrad_gpu_kda_tests \
    --gtest_filter='KdaKernels.ChunkedBackwardHashes*:KdaKernels.ForwardRecordHashes*' \
    > "$out/hash_$b.log" 2>&1
  echo "$b rc=$?"
  grep -h 'hashes' "$out/hash_$b.log"
done > "$out/hash_lines.txt" 2>&1
cat "$out/hash_lines.txt"
nb=$(grep -hc 'kda bwd hashes' "$out/hash_base.log")
ok=""
for c in next1 next3; do
  if [ "$nb" = 3 ] && [ "$(grep -h 'hashes' $out/hash_base.log)" = "$(grep -h 'hashes' $out/hash_$c.log)" ]; then
    ok="$ok $c"; echo "$c: hash lines EQUAL base's (3 backward + 3 forward)"
  else
    echo "$c: hash lines DIFFER from base's (or failed; base printed $nb backward lines): not shippable"
  fi
done > "$out/hash_compare.txt"
cat "$out/hash_compare.txt"
echo "== hashes done at $(el) s"; pack
OUT=$out BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=30 \
  timeout 100 bash tools/gpu/ab_bench.sh $D kda "base$ok" 3 "" > "$out/ab_stdout.txt" 2>&1
echo "== ab done at $(el) s"; cat "$out/ab/summary.txt" 2> /dev/null; pack
awk -F: '/ median|bwd chunked|fwd/ && !/^copy/ { n = split($2, x, " "); s = 0
  for (i = 1; i <= n; ++i) s += x[i]; if (n) printf "mean %s: %.4f ms (%d rounds)\n", $1, s / n, n }' \
  "$out/ab/summary.txt" 2> /dev/null | tee "$out/score.txt"
best=$(sed -n 's/^mean //p' "$out/score.txt" | awk -F': ' '/bwd chunked:/ { split($1, v, " ")
  s[v[1]] += $2 + 0 } END { m = ""; for (k in s) if (k != "base" && (m == "" || s[k] < s[m])) m = k
  print m }')
echo "fastest bitwise variant: ${best:-none}" | tee "$out/best.txt"
if [ -n "$best" ]; then
  T=$D/$best/cakegrad_gpu_kda_tests
  (timeout 110 $T > "$out/tests_$best.log" 2>&1; echo "rc=$?" >> "$out/tests_$best.log") &
  p1=$!
  (timeout 110 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
    > "$out/memcheck_$best.log" 2>&1; echo "rc=$?" >> "$out/memcheck_$best.log") &
  p2=$!
  (timeout 110 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
    --gtest_filter='KdaKernels.SanitizeChunkedBackward*' > "$out/racecheck_$best.log" 2>&1
   echo "rc=$?" >> "$out/racecheck_$best.log") &
  p3=$!
  wait $p1 $p2 $p3
  echo "== checks done at $(el) s"
  grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY| tests from .* ran" \
    "$out/tests_$best.log" "$out/memcheck_$best.log" "$out/racecheck_$best.log" | head -30
  pack
fi
for b in $best; do
  [ $(el) -lt 200 ] || break
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 25 ncu --clock-control none \
    --import-source no --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section SourceCounters -k regex:KdaChunkGradKernel \
    -c 1 -o /tmp/kda22m_$b $D/$b/cakegrad_kda_bench > "$out/ncu_grad_$b.log" 2>&1
  echo "ncu $b rc=$? at $(el) s"
  timeout 10 ncu -i /tmp/kda22m_$b.ncu-rep --page details > "$out/ncu_grad_$b.txt" 2>&1
  grep -E "Duration|Elapsed Cycles|Executed Ipc A|Stall Barrier|Stall Wait|Stall Long|Stall Short|Warp Cycles Per Issued|Instructions Executed" \
    "$out/ncu_grad_$b.txt" | head -12
  timeout 10 ncu -i /tmp/kda22m_$b.ncu-rep --page source --csv --print-source sass \
    > "$out/ncu_src_$b.csv" 2> "$out/ncu_src_$b.err"; gzip -f "$out/ncu_src_$b.csv"
  pack
done
echo "== done at $(el) s"
