#!/usr/bin/env bash
# kda11, one device call: base = main 3cc9b20, cand1 = Tinv block-row merges 4 columns per thread,
# cand2 = cand1 + M's zero fill without a runtime divisor, cand3 = cand2 + the column-factor loop
# with a compile-time trip count (bench and hashes only; preparation only; records meant to be
# bitwise main's). 1. copy rate; 2. forward-only A/B, 3 alternating rounds (ab_bench.sh, no
# checks); 3. in parallel: cand2's whole suite, memcheck and racecheck on *Sanitize*, and beside
# them the hash lines of all three builds, then ncu (time and executed instructions) of the
# preparation and the 64-row state pass at the packed shape (case 2) for base and cand2, and a
# full-set ncu of cand2's 64-row state pass (durations there are indicative: the sanitizers share
# the GPU). Everything is bounded so the call ends within ~165 s.
set -uo pipefail
D=.carry/kda11
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda11.tgz" -C "$out" .; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader; } > "$out/env.txt" 2>&1
cat "$out/env.txt"
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
OUT=$out BENCH_ENV="KDA_BENCH_FWD_ONLY=1" BENCH_TIMEOUT=20 \
  timeout 75 bash tools/gpu/ab_bench.sh $D kda "base cand1 cand2 cand3" 3 ""
echo "== ab done at $(el) s"; pack
v=cand2; T=$D/$v/cakegrad_gpu_kda_tests
(timeout 100 $T > "$out/tests_$v.log" 2>&1; echo "rc=$?" >> "$out/tests_$v.log") &
p1=$!
(timeout 110 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/memcheck_$v.log" 2>&1; echo "rc=$?" >> "$out/memcheck_$v.log") &
p2=$!
(timeout 110 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='*Sanitize*' \
  > "$out/racecheck_$v.log" 2>&1; echo "rc=$?" >> "$out/racecheck_$v.log") &
p3=$!
for b in base cand1 cand2 cand3; do
  timeout 25 $D/$b/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' > "$out/hash_$b.log" 2>&1
  echo "$b rc=$?: $(grep -h 'kda hashes' $out/hash_$b.log | tr '\n' ' ')"
done
echo "== hashes done at $(el) s"; pack
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active
for b in base cand2; do
  [ $(el) -lt 100 ] || break
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=2 timeout 25 ncu --clock-control none --metrics $M \
    -k regex:KdaChunk --launch-skip 6 --launch-count 2 --csv $D/$b/cakegrad_kda_bench > "$out/ncu_packed_$b.csv" 2>&1
  echo "ncu $b rc=$? at $(el) s"; awk -F'","' '/duration|inst_executed.sum"|per_cycle|issue_active/{print substr($5,16,30), $13, $15}' "$out/ncu_packed_$b.csv"
done
pack
if [ $(el) -lt 105 ]; then
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=2 timeout 30 ncu --clock-control none --set full --import-source no \
    -k regex:KdaChunkState --launch-skip 3 -c 1 -o /tmp/kda11_st64 $D/cand2/cakegrad_kda_bench > "$out/ncu_st64.log" 2>&1
  echo "ncu full st64 rc=$? at $(el) s"
  timeout 10 ncu -i /tmp/kda11_st64.ncu-rep --page details > "$out/details_st64.txt" 2>&1
  timeout 10 ncu -i /tmp/kda11_st64.ncu-rep --page source --csv --print-source sass > /tmp/kda11_src64.csv 2>&1
  timeout 10 python3 bench/ncu_sass_segments.py /tmp/kda11_src64.csv > "$out/segments_st64.txt" 2>&1
  head -14 "$out/segments_st64.txt"
  grep -E "Duration|Issued Ipc|Eligible Warps|Warp Cycles Per Issued|L2 Cache Throughput|DRAM Throughput" "$out/details_st64.txt" | head -8
fi
pack
wait $p1 $p2 $p3
echo "== checks done at $(el) s"
grep -hE "^\[  PASSED|^\[  FAILED|FAILED  \]|rc=|ERROR SUMMARY|RACECHECK SUMMARY| tests from .* ran" \
  "$out/tests_$v.log" "$out/memcheck_$v.log" "$out/racecheck_$v.log" | head -20
cat "$out/ab/summary.txt"
pack
echo "== done at $(el) s"
