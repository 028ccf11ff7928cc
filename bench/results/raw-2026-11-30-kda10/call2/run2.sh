#!/usr/bin/env bash
# kda10 call 2: base = main b9ce24b, cand1 = state-pass copy loops with compile-time trip counts,
# cand2 = cand1 + o warps beside the chain warps in the 16-row pass. Every output is meant to be
# bitwise main's. 1. copy rate; 2. ab_bench.sh forward-only x3 alternating, then both candidates'
# whole suite + memcheck + racecheck on KdaKernels.Sanitize* (in parallel); 3. hash lines of base;
# 4. ncu of the state pass (time, executed instructions) for cand1/cand2 at 16 and 32 rows;
# 5. full bench base, cand2, cand1 (the chunked backward's recompute runs the state pass).
set -uo pipefail
D=.carry/kda10
final=${OUT:-/tmp/out}; out=$(mktemp -d); mkdir -p "$final"
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
pack() { tar czf "$final/kda10_call2.tgz" -C "$out" .; }
timeout 15 $D/copybw > "$out/copy.txt" 2>&1; cat "$out/copy.txt"
OUT=$out BENCH_ENV="KDA_BENCH_FWD_ONLY=1" BENCH_TIMEOUT=30 TEST_TIMEOUT=150 \
  timeout 200 bash tools/gpu/ab_bench.sh $D kda "base cand1 cand2" 3 "cand1 cand2"
echo "== ab done at $(el) s"; pack
for v in base cand1 cand2; do
  timeout 20 $D/$v/cakegrad_gpu_kda_tests --gtest_filter='KdaKernels.ForwardRecordHashes*' > "$out/hash_$v.log" 2>&1
  echo "$v: $(grep -h 'kda hashes' $out/hash_$v.log | tr '\n' ' ')"
done
pack
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,smsp__warps_eligible.avg.per_cycle_active
for vc in base:1 cand1:1 cand2:1 cand1:0; do
  v=${vc%:*} cs=${vc#*:}
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=$cs timeout 30 ncu --clock-control none --metrics $M \
    -k regex:KdaChunkState --launch-skip 3 --launch-count 1 --csv $D/$v/cakegrad_kda_bench > "$out/ncu_state_${v}_$cs.csv" 2>&1
  echo "ncu $v case $cs rc=$? at $(el) s"; awk -F'","' '/duration|inst_executed.sum"/{print $13, $15}' "$out/ncu_state_${v}_$cs.csv"
done
pack
for v in base cand2 cand1; do
  timeout 35 $D/$v/cakegrad_kda_bench > "$out/full_bench_$v.txt" 2>&1
  echo "full bench $v rc=$? at $(el) s"; grep median "$out/full_bench_$v.txt"
  pack
done
echo "== done at $(el) s"
