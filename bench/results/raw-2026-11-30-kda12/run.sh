#!/usr/bin/env bash
# kda12 (NEVER RUN YET; written without device time): the next session's one device call for the
# kda-s12 candidates of the state pass (o warps of their own at 64 / 32 rows), all meant to be
# bitwise main's (host emulator: outputs fnv1a b7b5025fad63f41d for every variant).
#   base  = main 8a4a066
#   cand1 = 64 rows: 8 chain + 8 o warps of two state tiles (948f81f + test 4e5814b)
#   cand2 = cand1 + the second o warp per scheduler on reversed token tiles (balanced M U)
#   cand3 = cand2 + o warps at 32 rows too (branch kda-s12-c3)
#   run: {"command": "bash .carry/kda12/run.sh", "carry": [".carry/kda12"], "timeout_s": 360}
# 1. copy rate; 2. hash lines of all four builds (bitwise gate: must be equal to base's);
# 3. forward-only A/B, 3 alternating rounds (ab_bench.sh, no checks there); 4. cand3's whole suite,
# memcheck and racecheck on *Sanitize* (now with SanitizeSixtyFourRowStatePass: the 64-row pass's
# forward and checkpoint instances) in parallel with ncu of the 64-row (packed shape) and 32-row
# ((1, 8192, 32)) state pass per build (durations indicative there: the checks share the GPU);
# then a full-set ncu of cand2's 64-row pass split at barriers (bench/ncu_sass_segments.py);
# 5. the full bench (chunked backward: its recompute runs the checkpoint instances) of base and
# cand3 if time is left. Everything bounded so the call ends within ~330 s; logs in $OUT/kda12.tgz.
set -uo pipefail
D=.carry/kda12
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda12.tgz" -C "$out" .; }
V="base cand1 cand2 cand3"
{ date -u +%FT%TZ; cat $D/SOURCE; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit \
  --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
for b in $V; do
  timeout 25 $D/$b/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' \
    > "$out/hash_$b.log" 2>&1
  echo "$b rc=$?: $(grep -h 'kda hashes' $out/hash_$b.log | tr '\n' ' ')"
done
for b in cand1 cand2 cand3; do
  if [ -n "$(grep -h 'kda hashes' $out/hash_$b.log)" ] &&
     [ "$(grep -h 'kda hashes' $out/hash_base.log)" = "$(grep -h 'kda hashes' $out/hash_$b.log)" ]; then
    echo "$b: hash lines EQUAL base's"
  else echo "$b: hash lines DIFFER from base's (not bitwise: do not ship)"; fi
done | tee "$out/hash_compare.txt"
echo "== hashes done at $(el) s"; pack
OUT=$out BENCH_ENV="KDA_BENCH_FWD_ONLY=1" BENCH_TIMEOUT=20 \
  timeout 100 bash tools/gpu/ab_bench.sh $D kda "$V" 3 ""
echo "== ab done at $(el) s"; pack
v=cand3; T=$D/$v/cakegrad_gpu_kda_tests
(timeout 150 $T > "$out/tests_$v.log" 2>&1; echo "rc=$?" >> "$out/tests_$v.log") &
p1=$!
(timeout 160 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/memcheck_$v.log" 2>&1; echo "rc=$?" >> "$out/memcheck_$v.log") &
p2=$!
# racecheck of the new 64-row problem (68 chains, duration unknown) apart from the two old ones.
(timeout 160 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='*Sanitize*:-*SixtyFour*' > "$out/racecheck_$v.log" 2>&1
 echo "rc=$?" >> "$out/racecheck_$v.log") &
p3=$!
(timeout 160 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='*SixtyFour*' > "$out/racecheck64_$v.log" 2>&1
 echo "rc=$?" >> "$out/racecheck64_$v.log") &
p4=$!
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
for cs in 2 0; do
  for b in $V; do
    [ $(el) -lt 200 ] || break
    KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=$cs timeout 25 ncu --clock-control none --metrics $M \
      -k regex:KdaChunkState --launch-skip 3 --launch-count 1 --csv $D/$b/cakegrad_kda_bench \
      > "$out/ncu_state_case${cs}_$b.csv" 2>&1
    echo "ncu case $cs $b rc=$? at $(el) s"
    awk -F'","' '/duration|inst_executed.sum"|per_cycle|issue_active|registers/{print substr($5,1,40), $13, $15}' \
      "$out/ncu_state_case${cs}_$b.csv"
  done
done
pack
# A full-set profile of cand2's 64-row pass (its stalls by stretch, as kda11's of main's).
if [ $(el) -lt 200 ]; then
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=2 timeout 35 ncu --clock-control none --set full \
    --import-source no -k regex:KdaChunkState --launch-skip 3 -c 1 -o /tmp/kda12_st64 \
    $D/cand2/cakegrad_kda_bench > "$out/ncu_st64_cand2.log" 2>&1
  echo "ncu full st64 cand2 rc=$? at $(el) s"
  timeout 10 ncu -i /tmp/kda12_st64.ncu-rep --page details > "$out/details_st64_cand2.txt" 2>&1
  timeout 10 ncu -i /tmp/kda12_st64.ncu-rep --page source --csv --print-source sass \
    > /tmp/kda12_src64.csv 2>&1
  timeout 10 python3 bench/ncu_sass_segments.py /tmp/kda12_src64.csv > "$out/segments_st64_cand2.txt" 2>&1
  head -14 "$out/segments_st64_cand2.txt"
  grep -E "Duration|Issued Ipc|Eligible Warps|Warp Cycles Per Issued|L2 Cache Throughput" \
    "$out/details_st64_cand2.txt" | head -6
fi
pack
wait $p1 $p2 $p3 $p4
echo "== checks done at $(el) s"
grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY| tests from .* ran" \
  "$out/tests_$v.log" "$out/memcheck_$v.log" "$out/racecheck_$v.log" "$out/racecheck64_$v.log" |
  head -24
pack
for b in base cand3; do
  [ $(el) -lt 270 ] || break
  timeout 30 $D/$b/cakegrad_kda_bench > "$out/full_bench_$b.txt" 2>&1
  echo "full bench $b rc=$? at $(el) s"; grep median "$out/full_bench_$b.txt"
done
cat "$out/ab/summary.txt"
pack
echo "== done at $(el) s"
