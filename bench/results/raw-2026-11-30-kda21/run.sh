#!/usr/bin/env bash
# kda21: one device call for the chunked backward's reverse chain (KdaChunkDstateKernel; branch
# kda-s21). Variants (SOURCE): base = kda-s21 96b5a6c (main e360d94's kernels + the chunked
# backward hash test and KDA_BENCH_CHUNKED_ONLY); cand1 = 1a58e13 (register tiles at all widths);
# cand2 = 4b75a59 (cand1 + split roles at 16 rows; 32 / 64 rows SASS-identical to cand1).
#   run: {"command": "bash .carry/kda21/run.sh", "carry": [".carry/kda21"], "timeout_s": 300}
# 1. copy rate; 2. hash lines (forward and chunked backward; a cand ships only if all six equal
# base's); 3. A/B of the bitwise cands, KDA_BENCH_CHUNKED_ONLY=1, 4 alternating rounds;
# 4. suites of both cands, memcheck on *Sanitize*, racecheck on the three chunked-backward
# Sanitize problems (16-, 32-, 64-row chains), in parallel; 5. ncu of the reverse chain at
# (1, 32768, 16) (16 rows) then the packed shape (64 rows), base and cand2, while time allows.
set -uo pipefail
D=.carry/kda21
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda21.tgz" -C "$out" .; }
V="base cand1 cand2"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit \
  --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
for b in $V; do
  timeout 40 $D/$b/cakegrad_gpu_kda_tests \
    --gtest_filter='KdaKernels.ForwardRecordHashes*:KdaKernels.ChunkedBackwardHashes*' \
    > "$out/hash_$b.log" 2>&1
  echo "$b rc=$?"; grep -h 'kda .*hashes' "$out/hash_$b.log"
done > "$out/hash_lines.txt" 2>&1
cat "$out/hash_lines.txt"
ok=""
nb=$(grep -hc 'kda .*hashes' "$out/hash_base.log")
for c in cand1 cand2; do
  if [ "$nb" = 6 ] && [ "$(grep -h 'kda .*hashes' $out/hash_base.log)" = "$(grep -h 'kda .*hashes' $out/hash_$c.log)" ]; then
    echo "$c: all 6 hash lines EQUAL base's"; ok="$ok $c"
  else echo "$c: hash lines DIFFER from base's (or a run failed; base printed $nb lines): not shippable"; fi
done | tee "$out/hash_compare.txt"
ok=$(grep -o '^cand[12]: all' "$out/hash_compare.txt" | cut -d: -f1 | tr '\n' ' ')
echo "== hashes done at $(el) s (bitwise: $ok)"; pack
OUT=$out BENCH_ENV="KDA_BENCH_CHUNKED_ONLY=1" BENCH_TIMEOUT=30 \
  timeout 110 bash tools/gpu/ab_bench.sh $D kda "base $ok" 4 ""
echo "== ab done at $(el) s"; pack
awk -F: '/ median|bwd chunked|fwd/ && !/copy/ { n = split($2, x, " "); s = 0
    for (i = 1; i <= n; ++i) s += x[i]; printf "%-48s mean %.4f ms (%d rounds)\n", $1, s / n, n }' \
  "$out/ab/summary.txt" 2> /dev/null | tee "$out/score.txt"
timeout 15 $D/copybw > "$out/copy_after_ab.txt" 2>&1; cat "$out/copy_after_ab.txt"
R='KdaKernels.SanitizeChunkedBackward*:KdaKernels.SanitizeSixtyFourRowStatePass:KdaKernels.SanitizeThirtyTwoRowStatePass'
pids=()
for c in cand1 cand2; do
  T=$D/$c/cakegrad_gpu_kda_tests
  (timeout 150 $T > "$out/tests_$c.log" 2>&1; echo "rc=$?" >> "$out/tests_$c.log") &
  pids+=($!)
  (timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
    > "$out/memcheck_$c.log" 2>&1; echo "rc=$?" >> "$out/memcheck_$c.log") &
  pids+=($!)
  (timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter="$R" \
    > "$out/racecheck_$c.log" 2>&1; echo "rc=$?" >> "$out/racecheck_$c.log") &
  pids+=($!)
done
wait "${pids[@]}"
echo "== checks done at $(el) s"
for c in cand1 cand2; do
  echo "--- $c"
  grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY| tests from .* ran" \
    "$out/tests_$c.log" "$out/memcheck_$c.log" "$out/racecheck_$c.log" | head -20
done | tee "$out/checks_summary.txt"
pack
# ncu of the reverse chain: case 1 ((1, 32768, 16), 16 rows), then case 2 (packed, 64 rows).
for cs in 1 2; do
  for b in base cand2; do
    [ $(el) -lt 240 ] || break 2
    KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=$cs timeout 25 ncu --clock-control none \
      --import-source no --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --section MemoryWorkloadAnalysis --section LaunchStats \
      --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed.sum,smsp__inst_executed_op_shared_ld.sum \
      -k regex:KdaChunkDstate --launch-skip 3 -c 1 -o /tmp/kda21_${b}_$cs \
      $D/$b/cakegrad_kda_bench > "$out/ncu_${b}_case$cs.log" 2>&1
    echo "ncu $b case $cs rc=$? at $(el) s"
    timeout 8 ncu -i /tmp/kda21_${b}_$cs.ncu-rep --page details > "$out/ncu_${b}_case$cs.txt" 2>&1
    grep -E "Duration|Elapsed Cycles|SM Frequency|Registers|Issued Ipc|Stall|wavefronts|inst_executed|L1/TEX Cache Throughput|Memory Throughput" \
      "$out/ncu_${b}_case$cs.txt" | head -16
    pack
  done
done
echo "== done at $(el) s"; pack
